"""The four workloads with and without n-gram drafting, end to end on the real engine."""

import json

import pandas as pd
import pytest

from tests.pipeline import load_config, run_pipeline
from whichshot.prepare.workloads import pydoc_sections

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def workload_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("workloads")
    result = run_pipeline(workdir, load_config("workloads"))
    assert result.returncode == 0, result.stderr[-4000:]
    return workdir


@pytest.fixture(scope="module")
def shots(workload_run):
    return pd.read_parquet(workload_run / "results" / "shots.parquet")


def test_every_workload_ran_with_drafting_on(shots):
    drafted = shots[(shots["spec_mode"] == "ngram_simple") & (shots["workload"] != "continue_text")]
    assert set(drafted["workload"]) == {"verbatim_recall", "needle", "edit_file", "new_code", "explain"}
    assert (drafted["status"] == "ok").all()
    assert (drafted["output_tokens"] > 0).all()
    assert set(drafted["text_kind"]) == {"real", "synthetic"}


def test_drafting_was_really_on(shots):
    drafted = shots[shots["spec_mode"] == "ngram_simple"]
    assert drafted["engine_draft_tokens"].fillna(0).sum() > 0  # llama-server reports draft_n
    assert shots[shots["spec_mode"] == "none"]["engine_draft_tokens"].isna().all()


def test_engine_log_facts_are_read(shots):
    """KV cache size for every process, the mean draft length for every shot that drafted."""
    assert (shots["kv_cache_mib"] > 0).all() and (shots["kv_cache_cells"] > 0).all()
    drafted = shots[shots["engine_draft_tokens"].fillna(0) > 0]
    assert not drafted.empty and (drafted["engine_draft_mean_len"] >= 1).all()
    assert shots.loc[shots["engine_draft_tokens"].isna(), "engine_draft_mean_len"].isna().all()


def test_losslessness_is_measured_not_assumed(shots):
    drafted = shots[(shots["spec_mode"] == "ngram_simple") & (shots["workload"] != "continue_text")]
    assert drafted["lossless_vs_none"].notna().all()
    diverged = drafted[drafted["lossless_vs_none"] == False]  # noqa: E712
    assert diverged["first_divergence_token"].notna().all()


def test_quality_columns(shots):
    work = shots[shots["workload"] != "continue_text"]
    assert work["copy_fraction"].between(0, 1).all()
    assert work["self_repetition"].between(0, 1).all() and work["loop_detected"].notna().all()
    assert work["prompt_self_repetition"].between(0, 1).all()
    assert work["edit_intact"].notna().sum() == (work["workload"] == "edit_file").sum()
    assert work[work["workload"] == "new_code"]["code_parses"].notna().all()
    assert work[work["workload"] == "needle"]["needle_found"].notna().all()
    assert work[work["workload"] == "edit_file"]["edit_made"].notna().all()
    assert work[work["workload"] == "verbatim_recall"]["recall_exact"].notna().all()


def test_needle_documents_are_cut_exactly_and_recall_documents_are_whole_sections(workload_run):
    prompts = json.loads(
        (workload_run / "results" / "prompts" / "llama_cpp" / "smollm2_135m.json").read_text()
    )["workloads"]
    document_tokens = load_config("workloads")["workloads"]["document_tokens"]
    for key in ("needle-real", "needle-synthetic"):
        item = prompts[key]
        assert item["source"]["document_tokens"] == document_tokens
        assert item["prompt_style"] == "chat template"  # SmolLM2 ships a ChatML template
        assert item["prompt_tokens"] == len(item["token_ids"]) > document_tokens
    needle = prompts["needle-real"]["checks"]["needle"]
    assert prompts["needle-real"]["text"].count(needle) == 1
    # The recall returns its document whole: whole sections up to document_tokens, no cut sentence.
    recall = prompts["verbatim_recall-real"]
    document, sections = recall["checks"]["reference_text"], [text for _t, text in pydoc_sections()]
    assert any(document.startswith(text) for text in sections) and any(document.endswith(t) for t in sections)
    assert document_tokens // 2 < recall["prompt_tokens"] < prompts["needle-real"]["prompt_tokens"]


def test_workload_figures_exist(workload_run):
    figures = pd.read_parquet(workload_run / "results" / "figures.parquet")
    metrics = set(figures["metric"])
    assert {
        "speedup_vs_none",
        "acceptance_rate",
        "engine_draft_mean_len",
        "copy_fraction",
        "lossless_share",
    } <= metrics
    caveats = set(pd.read_parquet(workload_run / "results" / "caveats.parquet")["caveat_id"])
    assert "synthetic_text_in_use" in caveats
    # llama-server printed the mean length for every drafted request, so no cell lacks it.
    assert "acceptance_length_not_derivable" not in caveats


def test_every_workload_shot_is_gated_and_a_failed_gate_reaches_its_figures(workload_run, shots):
    work = shots[shots["workload"] != "continue_text"]
    assert work["task_done"].notna().all() and work["task_gate"].notna().all()
    assert shots.loc[shots["workload"] == "continue_text", "task_done"].isna().all()
    figures = pd.read_parquet(workload_run / "results" / "figures.parquet")
    caveats = pd.read_parquet(workload_run / "results" / "caveats.parquet").set_index("caveat_id")
    failed = work[work["task_done"] == False]  # noqa: E712
    if failed.empty:
        assert "task_not_done" not in caveats.index
        return
    touched = set(caveats.loc["task_not_done", "figure_ids"])
    for (workload, kind, protocol, mode), _rows in failed.groupby(
        ["workload", "text_kind", "protocol", "spec_mode"]
    ):
        cell = figures[
            (figures["workload"] == workload)
            & (figures["text_kind"] == kind)
            & (figures["protocol"] == protocol)
        ]
        speedups = cell[cell["metric"] == "speedup_vs_none"]
        if mode != "none":
            speedups = speedups[speedups["spec_mode"] == mode]
        assert set(speedups["figure_id"]) <= touched
    summary = (workload_run / "results" / "report" / "summary.md").read_text()
    if (figures["metric"] == "speedup_vs_none").any():
        assert "task not done" in summary
