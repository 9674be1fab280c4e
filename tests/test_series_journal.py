"""A series' journal and shot records, on the echo engine (tests/echo_engine.py: a real server
process that streams): what a rerun resumes, who may write a journal, where a shot's end reading
is taken, which shots an attempt's samples are tagged with, what a drafter has seen."""

import dataclasses
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests import echo_engine
from tests.fault_kit import RealEngine, child_processes, job_context, prompts, warm_job
from tests.pipeline import filled_config
from whichshot import atomic
from whichshot.atomic import JsonlJournal
from whichshot.errors import WhichshotError
from whichshot.host import host_identity
from whichshot.measure import series as series_module
from whichshot.measure.plan import SeriesInputs, series_plan
from whichshot.measure.plan import job_context as planned_context
from whichshot.measure.protocol import run_job
from whichshot.measure.series import SeriesOutputs, measure_series, run_series_with_telemetry


@pytest.fixture
def echo(tmp_path) -> RealEngine:
    engine = echo_engine.ENGINE
    build = engine.build({"kind": "echo", "greeting": "hi"}, tmp_path, 1)
    model_path = tmp_path / "model.bin"
    model_path.write_bytes(b"no weights: the echo engine repeats its prompt")
    return RealEngine(engine, build, model_path, {"sha256": "a" * 64, "metadata": {"file_type": None}})


def _journal(tmp_path, job) -> JsonlJournal:
    return JsonlJournal(tmp_path / "shots" / f"{job.job_id}.jsonl")


def test_a_journal_of_another_build_is_set_aside_and_the_series_starts_afresh(tmp_path, echo):
    job = warm_job(shots=2, length=16)
    journal = _journal(tmp_path, job)
    first = run_job(job_context(tmp_path, job, real=echo), journal)
    journal.rewrite(first[:1])  # as an attempt interrupted after shot 1 leaves it
    rebuilt = dataclasses.replace(echo, build={**echo.build, "build_id": "another-build"})
    second = run_job(job_context(tmp_path, job, real=rebuilt), journal)

    assert {r["build_id"] for r in second} == {"another-build"}  # none of the old build's shots
    assert [r["process_seq"] for r in second] == [1, 1]
    assert [r["process_start_reason"] for r in second] == ["series_start"] * 2
    stale = list(journal.partial_path.parent.glob(f"{journal.partial_path.name}.stale-*"))
    assert len(stale) == 1  # the old shots are kept aside, not deleted
    kept = [json.loads(line) for line in stale[0].read_text().splitlines()]
    assert [r["wall_start_utc"] for r in kept] == [first[0]["wall_start_utc"]]
    assert child_processes() == []


def test_a_journal_of_the_same_series_resumes(tmp_path, echo):
    job = warm_job(shots=2, length=16)
    journal = _journal(tmp_path, job)
    first = run_job(job_context(tmp_path, job, real=echo), journal)
    journal.rewrite(first[:1])
    again = run_job(job_context(tmp_path, job, real=echo), journal)
    assert again[0]["wall_start_utc"] == first[0]["wall_start_utc"]
    assert again[1]["wall_start_utc"] != first[1]["wall_start_utc"]
    assert [r["process_start_reason"] for r in again] == ["series_start", "resumed"]
    assert not list(journal.partial_path.parent.glob("*.stale-*"))


@pytest.mark.parametrize(
    "change",
    [
        {"output_tokens": 6},
        {"threads": 2},
        {"prompt": [1001, 1002, 1003]},
        {"spec_params": {"types": ["ngram-simple"]}},
        {"model_sha256": "b" * 64},
    ],
    ids=lambda change: next(iter(change)),
)
def test_any_identity_change_refuses_the_old_shots(tmp_path, echo, change):
    job = warm_job(shots=2, length=16)
    journal = _journal(tmp_path, job)
    journal.rewrite(run_job(job_context(tmp_path, job, real=echo), journal)[:1])
    ctx = job_context(tmp_path, job, real=echo, output_tokens=change.get("output_tokens", 8))
    if "threads" in change:
        ctx.settings = dataclasses.replace(ctx.settings, threads=change["threads"])
    if "prompt" in change:
        ctx.prompts["prompts"]["16A"]["token_ids"] = change["prompt"]
    if "spec_params" in change:
        ctx.spec_params = change["spec_params"]
    if "model_sha256" in change:
        ctx.model = {**ctx.model, "sha256": change["model_sha256"]}
    records = run_job(ctx, journal)
    assert len(list(journal.partial_path.parent.glob("*.stale-*"))) == 1
    assert records[0]["process_seq"] == 1 and records[0]["process_start_reason"] == "series_start"


def _planned(tmp_path, echo, job, engine=None, config=None, identity=None):
    """The context run_series builds from the series' plan: the smoke config's settings on the echo
    engine (`engine`: changes to its engines entry, `config`: to top-level sections), its inputs
    written as the earlier jobs write them."""
    settings = filled_config("smoke")
    settings["engines"] = {job.engine: {"kind": "echo", "greeting": "hi", "threads": 1, "gpu_layers": 0,
                                        **(engine or {})}}  # fmt: skip
    settings.update(config or {})
    settings["protocol"]["replace_busy"] = 0  # about resuming: other sessions' load replaces nothing here
    files = {
        "build": echo.build,
        "model": {"name": job.model, "path": str(echo.model_path), **echo.model},
        "prompts": prompts(job.prompt_tokens_requested),
    }
    for name, content in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(content))
    inputs = SeriesInputs(*(tmp_path / f"{name}.json" for name in files))
    return planned_context(series_plan(settings, job), inputs, {**host_identity(), **(identity or {})})


def _rerun(tmp_path, echo, monkeypatch, first: dict, second: dict) -> tuple[list[dict], list]:
    """A series journaled with one plan (interrupted after shot 1), rerun with another: the rerun's
    shots and the journals set aside."""
    monkeypatch.chdir(tmp_path)  # the plan's log folder is relative to the workflow's directory
    job = warm_job(shots=2, length=16)
    journal = _journal(tmp_path, job)
    journal.rewrite(run_job(_planned(tmp_path, echo, job, **first), journal)[:1])
    records = run_job(_planned(tmp_path, echo, job, **second), journal)
    return records, list(journal.partial_path.parent.glob("*.stale-*"))


def test_a_journal_of_the_same_plan_resumes(tmp_path, echo, monkeypatch):
    records, stale = _rerun(tmp_path, echo, monkeypatch, {}, {})
    assert stale == [] and [r["process_start_reason"] for r in records] == ["series_start", "resumed"]
    assert records[0]["settings_sha256"] == records[1]["settings_sha256"] and records[0]["gpu_layers"] == 0


@pytest.mark.parametrize(
    "second",
    [
        {"config": {"telemetry": {"backends": ["none"], "interval_s": 0.25}}},
        {"config": {"bench": {"enabled": False, "peer_client": {"enabled": True, "command": ["true"]}}}},
        # The port and timeouts change no finished shot: they are in no plan (issue 51).
        {"config": {"server": {"port": 0, "ready_timeout_s": 30, "shot_timeout_s": 60}}},
    ],
    ids=["telemetry", "bench", "server"],
)
def test_a_journal_resumes_whatever_the_engine_is_not_started_with(tmp_path, echo, monkeypatch, second):
    records, stale = _rerun(tmp_path, echo, monkeypatch, {}, second)
    assert stale == [] and [r["process_start_reason"] for r in records] == ["series_start", "resumed"]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"engine": {"gpu_layers": 0}}, {"engine": {"gpu_layers": 99}}),
        ({"identity": {"gpu_uuid": "GPU-1111"}}, {"identity": {"gpu_uuid": "GPU-2222"}}),
        # Settings the resume check does not name: the server settings' sha256 holds them all, so a
        # setting added later cannot be forgotten there.
        ({}, {"engine": {"a_setting_added_later": 1}}),
    ],
    ids=["gpu_layers", "gpu_uuid", "new_engine_setting"],
)
def test_a_journal_of_other_server_settings_or_gpu_is_set_aside(tmp_path, echo, monkeypatch, first, second):
    records, stale = _rerun(tmp_path, echo, monkeypatch, first, second)
    assert len(stale) == 1
    assert [r["process_start_reason"] for r in records] == ["series_start", "series_start"]


def test_a_journal_of_another_draft_model_pin_is_set_aside(tmp_path, echo):
    job = warm_job(shots=2, length=16)
    journal = _journal(tmp_path, job)
    ctx = job_context(tmp_path, job, real=echo)
    ctx.draft_model = {"name": "draft", "path": str(echo.model_path), "sha256": "c" * 64}
    journal.rewrite(run_job(ctx, journal)[:1])
    assert journal.read_existing()[0]["draft_model_sha256"] == "c" * 64
    ctx.draft_model = {**ctx.draft_model, "sha256": "d" * 64}
    records = run_job(ctx, journal)
    assert len(list(journal.partial_path.parent.glob("*.stale-*"))) == 1
    assert {r["draft_model_sha256"] for r in records} == {"d" * 64}


def test_a_second_job_of_the_same_series_stops_with_one_line(tmp_path):
    journal = JsonlJournal(tmp_path / "shots" / "series.jsonl")
    with journal.locked():
        second = JsonlJournal(tmp_path / "shots" / "series.jsonl")
        with (
            pytest.raises(WhichshotError, match="another job is measuring this series") as caught,
            second.locked(),
        ):
            pass
        assert "\n" not in str(caught.value)
    with journal.locked():  # released: the next job may take it
        pass


class _MarkClock:
    """Shot telemetry that records when each end reading was asked for, and what it was told."""

    def __init__(self) -> None:
        self.marks_s: list[float] = []
        self.tokens: list[int | None] = []

    def mark(self) -> None:
        self.marks_s.append(time.monotonic())

    def mark_soon(self) -> None:
        """The first token: not an end reading."""

    def summarize(self, t_start_s, t_end_s, output_tokens, engine_pid, first_token_s=None) -> dict:
        self.tokens.append(output_tokens)
        return {}


class _SlowAfterStream:
    """The echo engine whose shots spend half a second after their stream ended (as a replay, a
    /metrics read or a log wait does), and which can serve N streams at once."""

    def __init__(self, engine) -> None:
        self._engine = engine

    def __getattr__(self, name: str):
        return getattr(self._engine, name)

    def start(self, *args):
        return _SlowServer(self._engine.start(*args))


class _SlowServer:
    def __init__(self, server) -> None:
        self._server = server

    def __getattr__(self, name: str):
        return getattr(self._server, name)

    def shot(self, request):
        outcome = self._server.shot(request)
        time.sleep(0.5)
        return outcome

    def shot_streams(self, request, streams: int):
        return [self._server.shot(request) for _ in range(streams)]


def test_the_end_reading_is_taken_at_the_last_token_not_after_the_work_that_follows(tmp_path, echo):
    clock = _MarkClock()
    job = warm_job(shots=2, length=16)
    ctx = job_context(tmp_path, job, engine=_SlowAfterStream(echo.engine), telemetry=clock, real=echo)
    records = run_job(ctx, _journal(tmp_path, job))
    for record in records:
        after_end = [t - record["t_end_mono_s"] for t in clock.marks_s if t >= record["t_end_mono_s"]]
        assert min(after_end) < 0.1  # the reading that closes the shot's energy window


def test_per_token_energy_of_parallel_streams_counts_every_streams_tokens(tmp_path, echo):
    clock = _MarkClock()
    job = dataclasses.replace(warm_job(shots=1, length=16), parallel_streams=4)
    ctx = job_context(tmp_path, job, engine=_SlowAfterStream(echo.engine), telemetry=clock, real=echo)
    (record,) = run_job(ctx, _journal(tmp_path, job))
    assert record["output_tokens"] == 8 and record["streams_output_tokens"] == 32
    assert clock.tokens == [32]  # the energy of four streams over the tokens of four


def test_drafter_requests_seen_counts_what_the_process_served_before(tmp_path, echo):
    plain = warm_job(shots=3, length=16)
    drafted = dataclasses.replace(plain, repeat=2, spec_mode="lookahead")  # its own shot file
    seen = [r["drafter_requests_seen"] for r in run_job(job_context(tmp_path, drafted, real=echo),
                                                         _journal(tmp_path, drafted))]  # fmt: skip
    assert seen == [0, 1, 2]
    undrafted = run_job(job_context(tmp_path, plain, real=echo), _journal(tmp_path, plain))
    assert [r["drafter_requests_seen"] for r in undrafted] == [None] * 3


def test_an_attempts_samples_are_tagged_with_its_own_shots_only(tmp_path, echo):
    """After a reboot the monotonic clock starts again: an earlier attempt's shot windows may hold
    the new attempt's sample times, yet its samples are not theirs."""
    job = warm_job(shots=3, length=16)
    shots_path = tmp_path / "shots" / f"{job.job_id}.jsonl"
    samples_path = tmp_path / "telemetry" / f"{job.job_id}.jsonl"
    journal = JsonlJournal(shots_path)
    first = run_job(job_context(tmp_path, dataclasses.replace(job, series_length=1), real=echo), journal)
    journal.rewrite([{**first[0], "t_request_mono_s": 0.0, "t_end_mono_s": 1e12}])  # another boot's clock
    telemetry = {"backends": ["linux"], "interval_s": 0.05}
    run_series_with_telemetry(job_context(tmp_path, job, real=echo), shots_path, samples_path, telemetry)
    partial = samples_path.with_name(samples_path.name + ".partial")
    samples = [json.loads(line) for line in partial.read_text().splitlines()]
    tagged = {s["shot_id"] for s in samples}
    assert first[0]["shot_id"] not in tagged
    assert {f"{job.job_id}/shot2", f"{job.job_id}/shot3"} <= tagged


@pytest.mark.e2e  # a minute: a real kill and rerun
def test_a_kill_after_the_last_shot_keeps_the_series_for_the_rerun(tmp_path, echo, monkeypatch):
    """Ctrl-C in the after-bracket (or a full disk for bench.json): nothing has its final name yet,
    so Snakemake deletes nothing finished, and the rerun keeps every shot as it was."""
    job = warm_job(shots=2, length=16)
    outputs = SeriesOutputs(*(tmp_path / d / f"{job.job_id}.{x}" for d, x in
                              (("shots", "jsonl"), ("telemetry", "jsonl"), ("bench", "json"))))  # fmt: skip
    telemetry = {"backends": ["linux"], "interval_s": 0.05}

    def interrupted_after(_plan, series):
        series()
        raise KeyboardInterrupt  # SIGINT while llama-bench runs its after-bracket

    monkeypatch.setattr(series_module, "bracketed", interrupted_after)
    with pytest.raises(KeyboardInterrupt):
        measure_series(job_context(tmp_path, job, real=echo), outputs, telemetry, {"enabled": False})
    assert not any(path.exists() for path in dataclasses.astuple(outputs))
    kept = JsonlJournal(outputs.shots).read_existing()
    assert [r["series_position"] for r in kept] == [1, 2]

    monkeypatch.undo()
    measure_series(job_context(tmp_path, job, real=echo), outputs, telemetry, {"enabled": False})
    final = [json.loads(line) for line in outputs.shots.read_text().splitlines()]
    assert [r["wall_start_utc"] for r in final] == [r["wall_start_utc"] for r in kept]
    samples = [json.loads(line) for line in outputs.telemetry.read_text().splitlines()]
    assert {s["shot_id"] for s in samples} >= {r["shot_id"] for r in kept}  # the first attempt's samples
    assert json.loads(outputs.bench.read_text())
    assert child_processes() == []


def test_a_failure_mid_series_keeps_every_attempts_samples_tagged_with_the_shots_it_finished(tmp_path, echo):
    """Ctrl-C during shot 3 of a series resumed after shot 1: the first attempt's samples stay (its
    shot is kept), and this attempt's are tagged with shot 2, which it finished before the failure."""
    job = warm_job(shots=3, length=16)
    shots_path = tmp_path / "shots" / f"{job.job_id}.jsonl"
    samples_path = tmp_path / "telemetry" / f"{job.job_id}.jsonl"
    telemetry = {"backends": ["linux"], "interval_s": 0.05}
    first = dataclasses.replace(job, series_length=1)
    run_series_with_telemetry(job_context(tmp_path, first, real=echo), shots_path, samples_path, telemetry)

    def interrupt_at_shot_3(position: int) -> None:
        if position == 3:
            raise KeyboardInterrupt

    ctx = dataclasses.replace(job_context(tmp_path, job, real=echo), progress=interrupt_at_shot_3)
    with pytest.raises(KeyboardInterrupt):
        run_series_with_telemetry(ctx, shots_path, samples_path, telemetry)
    partial = samples_path.with_name(samples_path.name + ".partial")
    samples = [json.loads(line) for line in partial.read_text().splitlines()]
    assert {s["shot_id"] for s in samples} >= {f"{job.job_id}/shot1", f"{job.job_id}/shot2"}
    assert not list(samples_path.parent.glob("*stale*"))  # nothing of the kept shot 1 set aside


def _outputs(tmp_path, job) -> SeriesOutputs:
    return SeriesOutputs(*(tmp_path / d / f"{job.job_id}.{x}" for d, x in
                           (("shots", "jsonl"), ("telemetry", "jsonl"), ("bench", "json"))))  # fmt: skip


def test_two_runs_of_one_series_cannot_both_write(tmp_path, echo, monkeypatch):
    """A second run of a series while the first measures (two snakemake runs started by hand) stops
    with one line at once: it neither waits to measure the series again nor writes to its journal."""
    # The machine's measurement lock in a folder of this test's own: other measurements on this
    # machine must not hold up the first run (the second would wait on it, lock or no lock).
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    job = warm_job(shots=2, length=16)
    outputs = _outputs(tmp_path, job)
    telemetry = {"backends": ["none"], "interval_s": 0.05}
    first_is_measuring, release_first = threading.Event(), threading.Event()

    def hold_at_shot_2(position: int) -> None:
        if position == 2:
            first_is_measuring.set()
            release_first.wait(60)

    first_ctx = dataclasses.replace(job_context(tmp_path, job, real=echo), progress=hold_at_shot_2)
    first = threading.Thread(target=measure_series, args=(first_ctx, outputs, telemetry, {"enabled": False}))
    first.start()
    second_error: list[BaseException] = []

    def second_run() -> None:
        try:
            measure_series(job_context(tmp_path, job, real=echo), outputs, telemetry, {"enabled": False})
        except BaseException as exc:  # noqa: BLE001 -- handed to the test thread
            second_error.append(exc)

    try:
        assert first_is_measuring.wait(60)
        written = outputs.shots.with_name(outputs.shots.name + ".partial").read_text()
        second = threading.Thread(target=second_run)
        second.start()
        second.join(10)
        assert not second.is_alive(), "the second run waited to measure the series again"
        assert outputs.shots.with_name(outputs.shots.name + ".partial").read_text() == written
    finally:
        release_first.set()
        first.join(120)
        if "second" in locals():
            second.join(120)
    assert len(second_error) == 1 and isinstance(second_error[0], WhichshotError)
    assert "another job is measuring this series" in str(second_error[0])
    assert "\n" not in str(second_error[0])
    final = [json.loads(line) for line in outputs.shots.read_text().splitlines()]
    assert [r["series_position"] for r in final] == [1, 2]  # the first run's series, written once
    assert child_processes() == []


class _KillBetweenFinalNames:
    """os for whichshot.atomic, but a kill (SIGINT) as a second output of the job gets its final name:
    the moment between the journals' two renames (or links)."""

    def __init__(self, outputs: SeriesOutputs) -> None:
        self.finals = {outputs.shots, outputs.telemetry}

    def __getattr__(self, name: str):
        return getattr(os, name)

    def _guard(self, target) -> None:
        target = Path(target)
        if target in self.finals and any(f.exists() for f in self.finals - {target}):
            raise KeyboardInterrupt

    def replace(self, source, target) -> None:
        self._guard(target)
        os.replace(source, target)

    def link(self, source, target) -> None:
        self._guard(target)
        os.link(source, target)


def test_a_kill_between_the_two_final_names_loses_neither_shots_nor_samples(tmp_path, echo, monkeypatch):
    job = warm_job(shots=2, length=16)
    outputs = _outputs(tmp_path, job)
    telemetry = {"backends": ["linux"], "interval_s": 0.05}
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the measurement lock: this test's own
    monkeypatch.setattr(atomic, "os", _KillBetweenFinalNames(outputs))
    with pytest.raises(KeyboardInterrupt):
        measure_series(job_context(tmp_path, job, real=echo), outputs, telemetry, {"enabled": False})
    monkeypatch.setattr(atomic, "os", os)
    first_shots = JsonlJournal(outputs.shots).read_existing()
    for path in dataclasses.astuple(outputs):  # Snakemake deletes a failed job's outputs
        path.unlink(missing_ok=True)

    measure_series(job_context(tmp_path, job, real=echo), outputs, telemetry, {"enabled": False})
    final = [json.loads(line) for line in outputs.shots.read_text().splitlines()]
    assert [r["wall_start_utc"] for r in final] == [r["wall_start_utc"] for r in first_shots]
    assert len(final) == 2  # measured once, by the first attempt
    samples = [json.loads(line) for line in outputs.telemetry.read_text().splitlines()]
    assert {s["shot_id"] for s in samples} >= {r["shot_id"] for r in final}  # the first attempt's samples
    assert not list(outputs.shots.parent.glob("*.partial")) and not list(
        outputs.telemetry.parent.glob("*.partial")
    )
