"""A process whose shots ran beside other work is re-run in a new one (whichshot.measure.busy), for
real: the echo engine's server (a real process that streams) and a real CPU burner that spins while
the chosen processes' shots run, measured by the real host-load bracket (measure.host_load).

The last test does the same with the real llama.cpp server (e2e: it needs the cached build). This
is the protocol's level, not a pipeline run: the burner has to start before a given shot and
stop after it, which a run of Snakemake cannot be told to do. The machine is shared: other work may
make a process busy that the burner did not, so each test asserts what holds either way (the
burned process is replaced; no more than the limit; a quiet process is never replaced)."""

import dataclasses
import subprocess
import sys
import time

import pandas as pd
import pytest

from tests import echo_engine
from tests.fault_kit import RealEngine, child_processes, job_context, warm_job
from whichshot.atomic import JsonlJournal
from whichshot.measure.aggregate import aggregate
from whichshot.measure.busy import REPLACED, REPLACES_BUSY, busy_because, kept, replaced_processes
from whichshot.measure.host_load import busy_threshold_cores
from whichshot.measure.protocol import run_job
from whichshot.tables import read_jsonl

SPIN = "while True: pass"
# The burner spins this long before the shot it loads starts, so it is running when the bracket opens.
SPIN_UP_S = 0.3


@pytest.fixture
def echo(tmp_path) -> RealEngine:
    engine = echo_engine.ENGINE
    build = engine.build({"kind": "echo", "greeting": "hi"}, tmp_path, 1)
    model_path = tmp_path / "model.bin"
    model_path.write_bytes(b"no weights: the echo engine repeats its prompt")
    return RealEngine(engine, build, model_path, {"sha256": "a" * 64, "metadata": {"file_type": None}})


class Burner:
    """A CPU burner that spins during the first `calls` shots the protocol announces (ctx.progress),
    and is stopped at the next."""

    def __init__(self, calls: int) -> None:
        self.calls, self.seen = calls, 0
        self.process: subprocess.Popen | None = None

    def __call__(self, _position: int) -> None:
        self.seen += 1
        if self.seen <= self.calls and self.process is None:
            self.process = subprocess.Popen([sys.executable, "-c", SPIN])
            time.sleep(SPIN_UP_S)
        elif self.seen > self.calls:
            self.stop()

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def _run(tmp_path, echo, job, burner: Burner, limit: int) -> tuple[list[dict], list[dict]]:
    """(the records that count, every record the journal holds) of the series run with the burner
    (echo: the engine to run it on; None: the real llama.cpp server)."""
    ctx = job_context(tmp_path, job, real=echo, output_tokens=24)
    # Two engine threads on this machine's cores: the host_busy threshold is then small (its idle cores
    # plus the margin), far below the burner's one core.
    ctx.settings = dataclasses.replace(ctx.settings, threads=ctx.identity["cpu_count"])
    ctx.replace_busy, ctx.progress = limit, burner
    journal = JsonlJournal(tmp_path / "shots" / f"{job.job_id}.jsonl")
    try:
        records = run_job(ctx, journal)
    finally:
        burner.stop()
    assert child_processes() == []
    return records, journal.read_existing()


def _cold_job(processes: int):
    return dataclasses.replace(warm_job(shots=processes, length=16), protocol="cold")


def _by_process(records: list[dict]) -> dict[str, list[dict]]:
    processes: dict[str, list[dict]] = {}
    for record in records:
        processes.setdefault(record["process_id"], []).append(record)
    return processes


def _check_the_rule(all_records: list[dict], limit: int) -> int:
    """Every replaced process was busy, no more than `limit` were, and while the limit allowed none
    that was busy was kept; the number replaced."""
    processes = _by_process(all_records)
    replaced = [p for p, rs in processes.items() if rs[0]["status"] == REPLACED]
    assert len(replaced) <= limit
    for process_id, records in processes.items():
        if process_id in replaced:
            assert all(r["status"] == REPLACED and "threshold" in r["replaced_because"] for r in records)
            assert max(r["host_foreign_cores"] for r in records) > _limit(records[0])
        elif records[0]["busy_replaced"] < limit:  # the limit allowed its replacement: it was quiet
            assert busy_because(records) is None, records
    return len(replaced)


def _limit(record: dict) -> float:
    return busy_threshold_cores(record["cpu_count"], record["threads"])


def test_a_cold_process_that_ran_beside_a_burner_is_replaced_and_its_shot_kept_aside(tmp_path, echo):
    job = _cold_job(processes=2)
    records, journal = _run(tmp_path, echo, job, Burner(calls=1), limit=2)

    first = journal[0]
    assert first["status"] == REPLACED and first["process_seq"] == 1  # the burned process
    assert first["shot_id"] == f"{job.job_id}/shot1.replaced1"
    assert first["host_foreign_cores"] > _limit(first) + 0.3, first["host_foreign_cores"]
    assert [r["series_position"] for r in records] == [1, 2]  # every position counted once
    assert [r["shot_id"] for r in records] == [f"{job.job_id}/shot1", f"{job.job_id}/shot2"]
    assert records[0]["process_start_reason"] == REPLACES_BUSY and records[0]["busy_replaced"] >= 1
    assert all(r["status"] == "ok" for r in records)
    count = _check_the_rule(journal, limit=2)
    assert replaced_processes(journal) == count >= 1


def test_past_the_limit_a_busy_process_is_kept(tmp_path, echo):
    # The burner spins through the whole series: only the first process may be replaced.
    records, journal = _run(tmp_path, echo, _cold_job(processes=2), Burner(calls=10), limit=1)

    assert [r["status"] for r in journal] == [REPLACED, "ok", "ok"]
    assert [r["busy_replaced"] for r in records] == [1, 1]
    assert all(r["host_foreign_cores"] > _limit(r) for r in records)  # busy, and kept: the caveat tells
    assert _check_the_rule(journal, limit=1) == 1


def test_a_busy_warm_process_reruns_its_whole_series(tmp_path, echo):
    job = warm_job(shots=3, length=16)
    records, journal = _run(tmp_path, echo, job, Burner(calls=3), limit=2)

    first_process = [r for r in journal if r["process_seq"] == 1]
    assert [r["status"] for r in first_process] == [REPLACED] * 3
    assert [r["series_position"] for r in records] == [1, 2, 3]
    assert len({r["process_id"] for r in records}) == 1  # the kept series is one process, as planned
    assert records[0]["process_start_reason"] == REPLACES_BUSY
    assert [r["shot_index"] for r in records] == [1, 2, 3]
    _check_the_rule(journal, limit=2)


def test_no_limit_replaces_nothing(tmp_path, echo):
    records, journal = _run(tmp_path, echo, _cold_job(processes=1), Burner(calls=10), limit=0)
    assert journal == records and records[0]["busy_replaced"] == 0
    assert records[0]["process_start_reason"] == "cold"


def test_replaced_shots_never_reach_the_shots_table_and_a_rerun_resumes_the_count(tmp_path, echo):
    job = _cold_job(processes=2)
    _records, journal = _run(tmp_path, echo, job, Burner(calls=10), limit=1)
    path = tmp_path / "shots" / f"{job.job_id}.jsonl"
    JsonlJournal(path).rewrite(journal[:2])  # interrupted after the replacement's first shot
    again, journal_again = _run(tmp_path, echo, job, Burner(calls=10), limit=1)
    assert [r["status"] for r in journal_again] == [REPLACED, "ok", "ok"]  # the limit counts the old one
    assert again[1]["busy_replaced"] == 1 and again[1]["process_seq"] == 3

    JsonlJournal(path).publish()
    aggregate("shots", [path], tmp_path / "shots.parquet", "run")
    table = read_jsonl([path])
    assert len(table) == 3 and len(kept(table)) == 2
    shots = pd.read_parquet(tmp_path / "shots.parquet")
    assert sorted(shots["shot_id"]) == sorted(r["shot_id"] for r in again)
    assert REPLACED not in set(shots["status"])


@pytest.mark.e2e
def test_a_llama_cpp_process_beside_a_burner_is_replaced(tmp_path):
    records, journal = _run(tmp_path, None, _cold_job(processes=1), Burner(calls=1), limit=1)
    assert journal[0]["status"] == REPLACED and journal[0]["engine_kind"] == "llama_cpp"
    assert journal[0]["host_foreign_cores"] > _limit(journal[0]) + 0.3, journal[0]["host_foreign_cores"]
    assert [r["series_position"] for r in records] == [1] and records[0]["status"] == "ok"
    assert records[0]["process_start_reason"] == REPLACES_BUSY and records[0]["busy_replaced"] == 1
    assert records[0]["output_tokens"] == 24
