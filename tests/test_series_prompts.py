"""A series' own prompts, named by their content (whichshot.prepare.series_prompts): a rebuilt
prompts file names the same file for every series whose entries it left as they were, and another
for exactly those it changed."""

import base64
import copy
import json

import pytest

from tests.pipeline import load_config, run_pipeline
from whichshot.errors import WhichshotError
from whichshot.prepare.series_prompts import series_prompts_path, unrecorded_stale, write_series_prompts


def _prompt(tokens: int, variant: str, offset: int = 0) -> dict:
    return {"prompt_tokens": tokens, "variant": variant, "token_ids": list(range(offset, offset + tokens))}


PROMPTS = {  # as build_prompts writes it: the grid's lengths and a model's workloads
    "corpus": "pydoc_topics",
    "corpus_sha256": "a" * 64,
    "prompts": {
        "64A": _prompt(64, "A"),
        "64B": _prompt(64, "B", 500),
        "128A": _prompt(128, "A"),
        "128B": _prompt(128, "B", 500),
    },  # fmt: skip
    "workloads": {"explain-real": {"token_ids": [1, 2, 3], "source": {"corpus": "builtin"}}},
}
REQUESTS = {"r1": {"token_ids": [4, 5]}, "r2": {"token_ids": [6]}}
TRACE = {
    "traces": {
        "chat": {"path": "t.jsonl", "sha256": "b" * 64, "output_length": "natural", "requests": REQUESTS}
    }
}
ENTRIES = [("prompts", "64"), ("prompts", "128"), ("workloads", "explain-real")]


def _write(path, content) -> None:
    path.write_text(json.dumps(content))


def _paths(path) -> dict:
    return {entries: series_prompts_path(path, *entries) for entries in ENTRIES}


def test_a_rebuild_that_changes_one_length_renames_that_lengths_file_only(tmp_path):
    built = tmp_path / "model.json"
    _write(built, PROMPTS)
    before = _paths(built)
    rebuilt = copy.deepcopy(PROMPTS)
    rebuilt["prompts"]["128B"]["token_ids"][-1] += 1
    _write(built, rebuilt)
    after = _paths(built)
    assert {e for e in ENTRIES if before[e] != after[e]} == {("prompts", "128")}
    _write(built, PROMPTS)  # rebuilt as it was: the names it had
    assert _paths(built) == before


def test_a_series_file_holds_its_own_entries_shaped_as_the_prompts_file(tmp_path):
    built = tmp_path / "model.json"
    _write(built, PROMPTS)
    grid = series_prompts_path(built, "prompts", "64")
    assert grid.parent == tmp_path / "model" and grid.name.startswith("prompts-64.")
    write_series_prompts(built, grid)
    written = json.loads(grid.read_text())
    assert set(written["prompts"]) == {"64A", "64B"} and written["corpus_sha256"] == "a" * 64
    assert "workloads" not in written
    workload = series_prompts_path(built, "workloads", "explain-real")
    write_series_prompts(built, workload)
    assert json.loads(workload.read_text()) == {
        "workloads": {"explain-real": PROMPTS["workloads"]["explain-real"]}
    }


def test_a_trace_request_keeps_its_trace_and_only_its_request(tmp_path):
    built = tmp_path / "model.trace-chat.json"
    _write(built, TRACE)
    path = series_prompts_path(built, "requests", "r2")
    write_series_prompts(built, path)
    (trace,) = json.loads(path.read_text())["traces"].values()
    assert trace["requests"] == {"r2": {"token_ids": [6]}} and trace["sha256"] == "b" * 64


def test_a_name_the_prompts_file_no_longer_holds_is_refused_with_one_line(tmp_path):
    built = tmp_path / "model.json"
    _write(built, PROMPTS)
    stale = series_prompts_path(built, "prompts", "64")
    changed = copy.deepcopy(PROMPTS)
    changed["prompts"]["64A"]["token_ids"][0] = 9
    _write(built, changed)
    with pytest.raises(WhichshotError, match="no longer holds the prompts") as caught:
        write_series_prompts(built, stale)
    assert "\n" not in str(caught.value) and not stale.exists()
    with pytest.raises(WhichshotError, match="holds no prompts entry '256'"):
        series_prompts_path(built, "prompts", "256")


def test_a_stale_prompts_file_without_its_snakemake_record_is_named_to_delete(tmp_path):
    built = tmp_path / "results" / "prompts" / "e" / "m.json"
    built.parent.mkdir(parents=True)
    _write(built, PROMPTS)
    metadata = tmp_path / ".snakemake" / "metadata"
    assert unrecorded_stale({built: [("prompts", "64")]}, metadata) is None  # it holds what is needed
    assert unrecorded_stale({built: [("prompts", "512")]}, metadata) == (
        f"{built} was made for other settings (the prompts file holds no prompts entry '512') and "
        f"Snakemake has no record of it in {metadata} to rebuild it by: delete {built} and run again"
    )
    metadata.mkdir(parents=True)  # a record: Snakemake reruns build_prompts on changed params itself
    (metadata / base64.urlsafe_b64encode(str(built).encode()).decode()).write_text("{}")
    assert unrecorded_stale({built: [("prompts", "512")]}, metadata) is None


def test_a_dry_run_on_a_stale_unrecorded_prompts_file_ends_in_one_line(tmp_path):
    config = load_config("smoke")
    lengths = config["prompts"]["lengths"]
    built = tmp_path / "results" / "prompts" / "llama_cpp" / "smollm2_135m.json"
    built.parent.mkdir(parents=True)
    other = {**PROMPTS, "prompts": {f"{n + 1}A": _prompt(n + 1, "A") for n in lengths}}
    _write(built, other)
    result = run_pipeline(tmp_path, config, "--dry-run", timeout_s=600)
    relative, said = built.relative_to(tmp_path), result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in said and "InputFunctionException" not in said
    assert (
        f"{relative} was made for other settings (the prompts file holds no prompts entry '{lengths[0]}') "
        f"and Snakemake has no record of it in .snakemake/metadata to rebuild it by: delete {relative} "
        "and run again"
    ) in said.splitlines()
