"""Bring your own server (issue 35): an openai engine with base_url attaches to a server already
running instead of starting one. The config takes argv or base_url, never both; the grid gives it no
cold series and refuses a warm-up it cannot set; a real llama-server started here (not by whichshot)
serves a warm series through the protocol runner, and is still running after it."""

import copy
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from engines.openai_compat import ATTACHED_SENTENCE, chunks_outcome, server_attached
from tests.fault_kit import real_engine
from tests.pipeline import REPO, load_config, run_pipeline
from tests.shot_tables import cell, series, table
from tests.test_engine_openai import llama_server_binary, model_path  # noqa: F401 -- module fixtures
from whichshot.atomic import JsonlJournal
from whichshot.cache import cache_root
from whichshot.config import check_config, with_defaults
from whichshot.engine import load_engine
from whichshot.engine.base import ServerSettings
from whichshot.engine.process import LOOPBACK, free_port, http_ok
from whichshot.engine.sse import MalformedStream
from whichshot.errors import EngineNotReady, WhichshotError
from whichshot.figures.table import compute_figures
from whichshot.measure.estimate import estimate_series
from whichshot.measure.grid import Job, all_jobs
from whichshot.measure.protocol import JobContext, run_job
from whichshot.shots.upgrade import upgrade_shots
from whichshot.tables import record_schema

ATTACH = {"kind": "openai", "base_url": "http://127.0.0.1:8080"}
ARGV = ["llama-server", "--host", "{host}", "--port", "{port}", "-m", "{model}"]
OUTPUT_TOKENS = 8
WARM_SHOTS = 3


def config_with(**engines) -> dict:
    """The smoke config (cold and warm series) with these engines beside its llama_cpp."""
    config = load_config("smoke")
    config["engines"].update(copy.deepcopy(engines))
    return config


def refusal(config: dict) -> str:
    with pytest.raises(WhichshotError) as caught:
        check_config(config)
    return str(caught.value)


def test_an_openai_engine_takes_argv_or_base_url_never_both_nor_neither():
    check_config(config_with(mine=ATTACH))
    assert refusal(config_with(mine={**ATTACH, "argv": ARGV})) == (
        "invalid config: engines.mine.base_url: give argv (whichshot starts the server) or base_url "
        "(whichshot attaches to a running one), not both"
    )
    assert refusal(config_with(mine={"kind": "openai"})) == (
        "invalid config: engines.mine: give argv (whichshot starts the server) or base_url "
        "(whichshot attaches to a running one)"
    )


def test_base_url_must_be_an_http_url_of_the_servers_root():
    assert "engines.mine.base_url" in refusal(config_with(mine={**ATTACH, "base_url": "127.0.0.1:8080"}))
    assert "engines.mine.base_url" in refusal(config_with(mine={**ATTACH, "base_url": "ftp://host"}))
    assert refusal(config_with(mine={**ATTACH, "base_url": "http://127.0.0.1:8080/v1/"})) == (
        "invalid config: engines.mine.base_url: give the server's root URL without /v1 "
        "(whichshot adds /v1/...)"
    )
    assert refusal(config_with(mine={**ATTACH, "env": {"X": "1"}})).startswith(
        "invalid config: engines.mine.env: is for a server whichshot starts (argv)"
    )


def test_an_attached_server_refuses_a_warm_up_it_cannot_set():
    for value in ("on", "off"):
        config = config_with(mine=ATTACH)
        config["protocol"]["engine_warmup"] = ["engine_default", value]
        assert refusal(config) == (
            "invalid config: protocol.engine_warmup: engine mine attaches to a running server, whose "
            f"warm-up whichshot cannot set: {value!r} is refused, only engine_default"
        )


def test_an_attached_server_takes_no_modes_server_flags_and_needs_warm_series():
    config = config_with(mine=ATTACH)
    config["spec_modes"] = {"none": {}, "flags": {"openai": {"args": ["--spec-type", "ngram-simple"]}}}
    assert refusal(config) == (
        "invalid config: spec_modes.flags: engine mine attaches to a running server, which whichshot "
        "cannot give this mode's server flags: start the server with them yourself and leave the mode out"
    )
    config = config_with(mine=ATTACH)
    config["protocol"]["warm_shots"] = 0
    assert "protocol.warm_shots: engine mine attaches to a running server" in refusal(config)


def test_the_grid_has_no_cold_series_for_an_attached_engine_and_the_others_are_unchanged():
    plain = with_defaults(load_config("smoke"))
    both = with_defaults(config_with(mine=ATTACH))
    ids = {job.job_id for job in all_jobs(both)}
    assert {j.job_id for j in all_jobs(plain)} <= ids  # the started engine's series keep their ids
    mine = [job for job in all_jobs(both) if job.engine == "mine"]
    assert mine and {job.protocol for job in mine} == {"warm"}
    assert {job.protocol for job in all_jobs(both) if job.engine == "llama_cpp"} == {"cold", "warm"}
    starts = {e.job.engine: e.startup_s for e in estimate_series(both) if e.job.protocol == "warm"}
    assert starts["mine"] == 0 < starts["llama_cpp"]  # the estimate starts no attached server


def test_build_json_records_the_url_without_credentials(tmp_path):
    spec = with_defaults(
        config_with(mine={**ATTACH, "base_url": "https://bob:hunter2@host:8443/?api_key=k1"})
    )
    build = load_engine("openai").build(spec["engines"]["mine"], cache_root(""), 1)
    text = json.dumps(build)
    assert "hunter2" not in text and "k1" not in text and "bob" not in text
    assert build["attached_url"] == "https://<redacted>@host:8443/?api_key=<redacted>"
    assert build["identity"]["attached"] is True and build["binaries"] == {}


def test_a_stream_without_usage_ids_or_counts_fails_in_one_line():
    events = [
        (1.0, {"choices": [{"text": "ab", "finish_reason": None}]}),
        (2.0, {"choices": [{"text": "c", "finish_reason": "length"}]}),
    ]
    with pytest.raises(MalformedStream) as caught:
        chunks_outcome(0.0, 2.2, events)
    assert str(caught.value) == (
        "the server sent no usage.completion_tokens, no token ids and no per-chunk count: its 2 text "
        "chunks cannot be counted as tokens (it must honour stream_options.include_usage)"
    )


def test_nothing_answers_at_base_url_is_one_clear_line(tmp_path):
    engine = load_engine("openai")
    spec = with_defaults({"engines": {"mine": {**ATTACH, "base_url": f"http://{LOOPBACK}:{free_port()}"}}})
    settings = ServerSettings(threads=1, context_tokens=512, engine_spec=spec["engines"]["mine"])
    with pytest.raises(EngineNotReady, match="no server answers 200 at .*/health: start it first"):
        engine.start({}, Path("unused.gguf"), settings, tmp_path / "x.log")


def test_the_attached_caveat_reaches_the_attached_cells_figures_only():
    attached = series(cell(engine="mine"), [{}, {}, {}], engine_kind="openai", engine_attached=True)
    started = series(cell(engine="srv"), [{}, {}, {}], engine_kind="openai", engine_attached=False)
    shots = table(attached + started)
    _figures, caveats = compute_figures(shots, [], 0.7)
    (found,) = [c for c in caveats if c["caveat_id"] == "server_attached"]
    assert found["sentence"] == ATTACHED_SENTENCE and found["figure_ids"]
    assert set(found["shot_ids"]) == {row["shot_id"] for row in attached}
    # srv's own figures stay clean; its side-by-side figures read mine's shots, so they carry it
    others = [f for f in found["figure_ids"] if f.startswith("srv/")]
    assert others and all("/xengine_" in f for f in others), others


def test_older_shots_read_as_not_attached():
    old = table(series(cell(), [{}, {}])).assign(schema_version=8, engine_attached=None)
    assert upgrade_shots(old)["engine_attached"].tolist() == [False, False]
    assert record_schema("shots")["x-schema-version"] >= 9  # the version that added engine_attached


@pytest.fixture(scope="module")
def users_server(llama_server_binary, model_path, tmp_path_factory):  # noqa: F811 -- fixtures above
    """A llama-server the user started (here: this test, not whichshot), on loopback."""
    port = free_port()
    log = tmp_path_factory.mktemp("users-server") / "server.log"
    argv = [llama_server_binary, "--model", str(model_path), "--host", LOOPBACK, "--port", str(port),
            "--threads", "1", "--ctx-size", "512", "--parallel", "1", "--no-webui", "--metrics"]  # fmt: skip
    with open(log, "wb") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://{LOOPBACK}:{port}"
    try:
        for _ in range(600):
            if http_ok(f"{url}/health") or server.poll() is not None:
                break
            subprocess.run(["sleep", "0.1"], check=True)
        assert http_ok(f"{url}/health"), log.read_text()[-2000:]
        yield server, url
    finally:
        server.terminate()
        server.wait(30)


@pytest.fixture(scope="module")
def attached_series(users_server, tmp_path_factory):
    """A warm series against the user's server through the protocol runner, and the config's grid."""
    process, url = users_server
    tmp = tmp_path_factory.mktemp("attach")
    config = with_defaults(config_with(mine={"kind": "openai", "base_url": url, "threads": 1}))
    check_config(config)
    spec = config["engines"]["mine"]
    engine = load_engine("openai")
    build = engine.build(spec, cache_root(""), 1)
    settings = ServerSettings(threads=1, context_tokens=512, engine_spec=spec)
    helper = engine.start(build, Path("not-used.gguf"), settings, tmp / "tokenize.log")
    ids = helper.tokenize("The quick brown fox jumps over the lazy dog. " * 8)[:48]
    helper.stop()
    job = Job(engine="mine", model="smollm2_135m", prompt_tokens_requested=48, protocol="warm",
              context_tokens_requested=512, repeat=1, series_length=WARM_SHOTS)  # fmt: skip
    ctx = JobContext(
        job=job, engine=engine, build=build, model_path=real_engine().model_path,
        model={"sha256": "test", "metadata": {"file_type": None}},
        prompts={"corpus": "fixed", "prompts": {"48A": {"token_ids": ids}, "48B": {"token_ids": ids}}},
        settings=settings, output_tokens=OUTPUT_TOKENS, shot_timeout_s=120, log_dir=tmp / "logs",
    )  # fmt: skip
    records = run_job(ctx, JsonlJournal(tmp / "shots.jsonl"))
    return records, all_jobs(config), build, process


def test_an_attached_server_serves_a_warm_series_of_ok_shots(attached_series):
    records, _jobs, _build, _process = attached_series
    assert [r["status"] for r in records] == ["ok"] * WARM_SHOTS, [r["error"] for r in records]
    assert [r["shot_index"] for r in records] == [1, 2, 3]
    for record in records:
        assert record["output_tokens"] == OUTPUT_TOKENS == record["engine_output_tokens"]
        assert record["engine_attached"] is True and record["process_start_reason"] == "attached"
        # Not measured, never invented: whichshot did not start the server.
        assert record["pid"] is None and record["process_ready_s"] is None and record["process_age_s"] is None
        assert record["host_foreign_cpu_s"] is None and record["host_foreign_cores"] is None


def test_an_attached_server_has_no_cold_series_in_the_grid(attached_series):
    _records, jobs, _build, _process = attached_series
    mine = [job for job in jobs if job.engine == "mine"]
    assert mine and all(job.protocol == "warm" for job in mine)
    assert any(job.protocol == "cold" for job in jobs if job.engine == "llama_cpp")


def test_the_attached_caveat_fires_on_the_attached_shots_only(attached_series):
    records, _jobs, _build, _process = attached_series
    started = {**records[0], "shot_id": "other/shot1", "engine_attached": False}
    finding = server_attached(pd.DataFrame([*records, started]))
    assert finding is not None and finding.caveat_id == "server_attached"
    assert finding.sentence == ATTACHED_SENTENCE
    assert finding.shot_ids == {r["shot_id"] for r in records}


def test_the_example_config_runs_the_pipeline_against_the_users_server(users_server, tmp_path):
    """config/attach-example.yaml end to end (prompts tokenized by the server, figures, report)."""
    process, url = users_server
    config = yaml.safe_load((REPO / "config" / "attach-example.yaml").read_text())
    config["engines"]["my_server"]["base_url"] = url
    config["protocol"].update(warm_shots=3, output_tokens=8)
    config["prompts"]["lengths"] = [64]
    config["protocol"]["context_tokens"] = [512]
    result = run_pipeline(tmp_path, config, timeout_s=900)
    assert result.returncode == 0, result.stderr[-3000:]
    shots = pd.read_parquet(tmp_path / "results" / "shots.parquet")
    assert len(shots) == 3 and (shots["status"] == "ok").all() and shots["engine_attached"].all()
    assert set(shots["protocol"]) == {"warm"} and shots["pid"].isna().all()
    caveats = pd.read_parquet(tmp_path / "results" / "caveats.parquet")
    assert ATTACHED_SENTENCE in set(caveats["sentence"])
    assert "did not start this server" in (tmp_path / "results" / "report" / "summary.md").read_text()
    assert process.poll() is None


def test_the_users_server_is_still_running_after_the_series(attached_series, users_server):
    _records, _jobs, build, process = attached_series
    _server, url = users_server
    assert process.poll() is None and http_ok(f"{url}/health")  # whichshot did not stop it
    assert build["attached_url"] == url
    process.terminate()  # the user's to stop: here, the test's
    assert process.wait(30) is not None and not http_ok(f"{url}/health")
