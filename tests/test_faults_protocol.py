"""Protocol faults the real engine cannot be made to commit (malformed JSON, invalid UTF-8, more
output than asked, an error event, a stream cut short): a stand-in server (fake_engine_http.py)
commits them, and the real client code (sse.py, LlamaServer.shot) and protocol handle them."""

import dataclasses
import sys
import time
from pathlib import Path

import pytest
import requests

from engines.llama_cpp import LlamaServer
from tests.fault_kit import RealEngine, child_processes, job_context, warm_job
from whichshot.atomic import JsonlJournal
from whichshot.engine.base import UNKNOWN_DRAFT_LIMITS
from whichshot.engine.process import LOOPBACK, EngineProcess, free_port, http_ok
from whichshot.measure.protocol import run_job

FAKE = Path(__file__).resolve().parent / "fake_engine_http.py"
NO_MODEL = {"sha256": "0" * 64, "metadata": {"file_type": None}}  # the stand-in loads no model

# behaviour -> the error the shot must be recorded with ("" = the shot is fine)
CASES = {
    "ok": "",
    "malformed_json": "MalformedStream: malformed JSON event",
    "invalid_utf8": "MalformedStream: invalid UTF-8 in event stream",
    "too_many_events": "MalformedStream: more than 10 events: output far longer than asked",
    "too_many_tokens": "MalformedStream: output longer than asked: 160 tokens for n_predict 8",
    "error_event": "EngineRefused: engine error during the stream: fake engine ran out of memory",
    "no_final": "MalformedStream: the stream ended without its final (stop) event",
    "wrong_types": "MalformedStream: event 'tokens' is not a list of token ids",
    "http_error": "EngineRefused: engine refused the request (HTTP 400): fake engine refuses this prompt",
    "stops_early": "TokenCountMismatch: asked for exactly 8 tokens (end of sequence ignored) but got 3",
    "count_disagrees": "TokenCountMismatch: 8 tokens streamed but the engine reports 9",
    "held_back": "TokenCountMismatch: 1 of 8 token ids missing from the stream",
    "one_body": "MalformedStream: the answer came as one body (Content-Length), not as a stream",
}


class FakeEngine:
    """Starts fake_engine_http.py like llama-server and talks to it with the real LlamaServer."""

    kind = "llama_cpp"
    warmups = {"engine_default": ((), "none (a stand-in server)")}
    load_axes = frozenset()

    def draft_limits(self, settings):
        return UNKNOWN_DRAFT_LIMITS

    def __init__(self, behaviours: list[str]) -> None:
        self.behaviours = behaviours
        self.starts = 0

    def start(self, _build, _model_path, settings, log_path) -> LlamaServer:
        self.starts += 1
        port = free_port()
        argv = [sys.executable, str(FAKE), str(port), ",".join(self.behaviours)]
        process = EngineProcess(argv, log_path)
        base_url = f"http://{LOOPBACK}:{port}"
        ready_s = process.wait_ready(lambda: http_ok(f"{base_url}/health"), settings.ready_timeout_s)
        return LlamaServer(process, base_url, ready_s)


def test_each_malformed_answer_fails_its_shot_with_the_reason_and_the_series_goes_on(tmp_path):
    behaviours = [*CASES, "ok"]
    engine = FakeEngine(behaviours)
    no_build = RealEngine(engine, {"build_id": "none"}, tmp_path / "no-model.gguf", NO_MODEL)
    ctx = job_context(tmp_path, warm_job(shots=len(behaviours)), engine=engine, real=no_build)
    records = run_job(ctx, JsonlJournal(tmp_path / "shots" / f"{ctx.job.job_id}.jsonl"))

    assert child_processes() == []
    assert engine.starts == 1  # a bad answer is not a dead engine: same process throughout
    assert len(records) == len(behaviours)
    for behaviour, record in zip(behaviours, records, strict=True):
        expected = CASES[behaviour]
        if not expected:
            assert (record["status"], record["error"], record["output_tokens"]) == ("ok", None, 8)
            continue
        assert record["status"] == "failed", behaviour
        assert record["error"].startswith(expected), (behaviour, record["error"])
        assert "\n" not in record["error"]
        assert record["engine_died"] is False
        assert record["output_token_ids"] == [] and record["output_text"] is None


@pytest.mark.parametrize("behaviour", ["malformed_json", "invalid_utf8", "error_event"])
def test_the_fake_engine_really_sends_what_it_claims(tmp_path, behaviour):
    # Guards the guard: the raw bytes on the wire carry the fault (else the test above proves nothing).
    port = free_port()
    with EngineProcess([sys.executable, str(FAKE), str(port), behaviour], tmp_path / "log") as process:
        process.wait_ready(lambda: http_ok(f"http://{LOOPBACK}:{port}/health"), 30)
        body = {"prompt": [1, 2, 3], "n_predict": 4}
        raw = requests.post(f"http://{LOOPBACK}:{port}/completion", json=body, timeout=30).content
    lines = [line for line in raw.split(b"\n") if line.startswith(b"data:")]
    if behaviour == "invalid_utf8":
        with pytest.raises(UnicodeDecodeError):
            raw.decode("utf-8")
    elif behaviour == "malformed_json":
        assert lines[1] == b'data: {"content": " t1", "tokens": [101'
    else:
        assert b'"error"' in lines[-1]
    assert child_processes() == []


def test_the_request_clock_starts_once_the_body_is_built(tmp_path, monkeypatch):
    from whichshot.engine import sse

    built_at = []
    real_dumps = sse.json.dumps

    def slow_dumps(payload, *args, **kwargs):  # a long prompt takes a while to serialise
        text = real_dumps(payload, *args, **kwargs)
        time.sleep(0.3)
        built_at.append(time.monotonic())
        return text

    monkeypatch.setattr(sse.json, "dumps", slow_dumps)
    port = free_port()
    with EngineProcess([sys.executable, str(FAKE), str(port), "ok"], tmp_path / "log") as process:
        process.wait_ready(lambda: http_ok(f"http://{LOOPBACK}:{port}/health"), 30)
        body = {"prompt": [1, 2, 3], "n_predict": 4}
        record = sse.post_stream(f"http://{LOOPBACK}:{port}/completion", body, 30, max_events=10)
    assert built_at and record.t_request_s >= built_at[0]  # TTFT holds no serialisation time


def test_a_failed_precondition_shot_is_recorded_and_the_series_goes_on(tmp_path):
    """The unmeasured warm-up before a warm series' shot 1 gets an error: that shot is recorded as
    failed with the reason (one line), the warm-up is done again in the same live process before
    the series goes on (its later shots are not timed warm after a cut-short warm-up), and a rerun
    finds the series complete instead of failing the same way again."""
    engine = FakeEngine(["error_event", "ok"])
    no_build = RealEngine(engine, {"build_id": "none"}, tmp_path / "no-model.gguf", NO_MODEL)
    job = dataclasses.replace(warm_job(shots=3), precondition_s=0.01)
    journal = JsonlJournal(tmp_path / "shots" / f"{job.job_id}.jsonl")
    records = run_job(job_context(tmp_path, job, engine=engine, real=no_build), journal)

    assert [r["status"] for r in records] == ["failed", "ok", "ok"]
    assert records[0]["error"] == (
        "precondition shot failed, shot not sent: EngineRefused: engine error during the stream: "
        "fake engine ran out of memory"
    )
    assert records[0]["engine_died"] is False and records[0]["output_tokens"] is None
    assert engine.starts == 1 and len({r["process_id"] for r in records}) == 1
    # The cut-short warm-up is done again before shot 2: it follows a whole one, like shot 1 would have.
    assert records[0]["precondition_shots"] == 0 and records[1]["precondition_shots"] >= 1
    assert records[2]["precondition_shots"] == records[1]["precondition_shots"]
    # The failed warm-up request and the second warm-up's were served: the shot index counts them.
    assert records[1]["shot_index"] == 2 + records[1]["precondition_shots"]
    again = run_job(job_context(tmp_path, job, engine=engine, real=no_build), journal)
    assert [r["wall_start_utc"] for r in again] == [r["wall_start_utc"] for r in records]
    assert engine.starts == 1  # nothing left to measure: no process started
    assert child_processes() == []
