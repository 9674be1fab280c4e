"""Run one series (job): start processes, send shots, rest, record every shot durably."""

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import requests

from whichshot.atomic import JsonlJournal
from whichshot.engine.base import (
    STARTUP_FACTS,
    Engine,
    RunningEngine,
    ServerSettings,
    ShotOutcome,
    ShotRequest,
)
from whichshot.engine.engine_host import attached, engine_host
from whichshot.errors import EngineDied, WhichshotError
from whichshot.hashing import sha256_text
from whichshot.measure.busy import (
    REPLACES_BUSY,
    busy_because,
    kept,
    mark_replaced,
    replaced_processes,
)
from whichshot.measure.grid import Job
from whichshot.measure.host_load import HostLoad
from whichshot.measure.order import Place, order_fields
from whichshot.measure.records import (
    SCHEMA_VERSION,
    client_fields,
    empty_result_fields,
    engine_fields,
    output_fields,
    stream_fields,
)
from whichshot.measure.refusals import check_outcome
from whichshot.prepare.user_texts import user_source_pin
from whichshot.shots.axes import AXES, BASE_WORKLOAD, NO_DRAFT, ONE_STREAM, TRACE_WORKLOAD
from whichshot.shots.quality_fields import quality_fields
from whichshot.tell import tell


class ShotTelemetry(Protocol):
    """Brackets each shot with samples and summarises the window."""

    def mark(self) -> None: ...

    def mark_soon(self) -> None: ...

    def summarize(
        self,
        t_start_s: float,
        t_end_s: float,
        output_tokens: int | None,
        engine_pid: int | None,
        first_token_s: float | None = None,
    ) -> dict: ...


@dataclass
class JobContext:
    """Everything one job needs: its plan (measure.plan) with what the upstream stages made."""

    job: Job
    engine: Engine
    build: dict[str, Any]
    model_path: Path
    model: dict[str, Any]
    prompts: dict[str, Any]
    settings: ServerSettings
    output_tokens: int | None  # the grid's budget, a workload's; None: each trace request has its own
    shot_timeout_s: float
    log_dir: Path
    identity: dict[str, Any] = field(default_factory=dict)
    spec_params: dict[str, Any] = field(default_factory=dict)  # the mode's settings for this engine kind
    draft_model: dict[str, Any] | None = None  # the draft model's record (results/models) if it drafts
    settings_sha256: str | None = None  # its plan's server settings' (measure.plan); None: made by hand
    telemetry: ShotTelemetry | None = None
    progress: Callable[[int], None] | None = None  # told the position of each shot before it runs
    place: Place | None = None  # the series' place in the run's order (measure.order); None: by hand
    replace_busy: int = 0  # processes of the series that may be replaced for other work (measure.busy)


@dataclass
class _ProcessState:
    server: RunningEngine
    process_id: str
    start_reason: str
    shots_served: int = 0
    precondition_shots: int = 0
    requests_served: int = 0  # every request the process answered: streams and replays each count
    start_mark: str | None = None  # an attached server's word for when its process started
    busy_replaced: int = 0  # processes of the series replaced before this one started (measure.busy)


@dataclass
class SeriesShots:
    """A series' shot records as a job goes: those an earlier, interrupted attempt left in the
    journal (None until the journal is read), and those this attempt measured so far (its
    telemetry samples belong to these alone)."""

    resumed: list[dict[str, Any]] | None = None
    measured: list[dict[str, Any]] = field(default_factory=list)

    @property
    def records(self) -> list[dict[str, Any]]:
        """The records that count: a replaced process's are left out (measure.busy)."""
        return kept((self.resumed or []) + self.measured)


def run_job(ctx: JobContext, journal: JsonlJournal) -> list[dict[str, Any]]:
    """Every shot of the series (measure_job), the journal left unpromoted."""
    shots = SeriesShots()
    measure_job(ctx, journal, shots)
    return shots.records


def measure_job(ctx: JobContext, journal: JsonlJournal, shots: SeriesShots) -> None:
    """Run every shot of the series that the journal does not already hold, filling `shots` as it
    goes (so a caller still knows them when a shot's failure or Ctrl-C ends the job), one process
    after another; a process that ran beside other work is replaced (measure.busy) while the series'
    limit allows. The journal is not promoted: the caller does that last, once everything else the
    series writes is on disk."""
    shots.resumed = resumed = _resumable(ctx, journal)
    skipped = prompt_of(ctx, "A").get("skipped")
    if skipped:
        if not resumed:  # a request that does not fit: one row says so, no process started
            record = _skipped_record(ctx, skipped)
            with _writable(journal):
                journal.append(record)
            shots.measured.append(record)
        return
    finished = {r["series_position"] for r in kept(resumed)}
    pending = [p for p in range(1, ctx.job.series_length + 1) if p not in finished]
    run = _SeriesRun(process_seq=1 + max((r["process_seq"] for r in resumed), default=0),
                     replaced=replaced_processes(resumed))  # fmt: skip
    while pending:
        served = _run_process(ctx, journal, shots, pending, run)
        pending = pending[len(served) :]  # one record per position served
        because = busy_because(served) if run.started_here else None
        run.replacing = because is not None and run.replaced < ctx.replace_busy
        run.engine_died = served[-1]["engine_died"]
        if run.replacing:
            run.replaced += 1
            tell(f"whichshot: {ctx.job.job_id}: {because}: its process is replaced "
                 f"({run.replaced} of at most {ctx.replace_busy}) and its shots run again")  # fmt: skip
            mark_replaced(served, because, run.replaced)
            with _writable(journal):
                journal.rewrite(shots.resumed + shots.measured)
            pending = [r["series_position"] for r in served] + pending


@dataclass
class _SeriesRun:
    """Where a series' run stands between its processes."""

    process_seq: int  # the next process's number
    replaced: int  # processes of the series replaced so far (the journal's included)
    replacing: bool = False  # whether the next process replaces the last one
    engine_died: bool = False  # whether the last process's engine died
    started_here: bool = False  # whether whichshot started the last process (an attached one: no)


def _run_process(
    ctx: JobContext, journal: JsonlJournal, shots: SeriesShots, positions: list[int], run: _SeriesRun
) -> list[dict[str, Any]]:
    """One process: started, preconditioned where the series is warm, then the pending positions it
    serves (up to the next that needs a fresh process, or the engine's death); its records."""
    reason = REPLACES_BUSY if run.replacing else _start_reason(ctx.job, positions[0], run.engine_died)
    state = _start(ctx, run.process_seq, reason, run.replaced)
    run.process_seq += 1
    run.started_here = state.server.process is not None
    served: list[dict[str, Any]] = []
    try:
        warm_up_failed = _precondition(ctx, state) if ctx.job.protocol == "warm" else None
        for position in positions:
            if served and (ctx.job.fresh_process_before(position) or served[-1]["engine_died"]):
                break
            if served and ctx.job.rest_s > 0:
                time.sleep(ctx.job.rest_s)
            if ctx.progress is not None:
                ctx.progress(position)
            restarted = _restarted(ctx, state, run.process_seq)
            if restarted is not None:
                state, run.process_seq = restarted, run.process_seq + 1
            if warm_up_failed is not None:
                record, warm_up_failed = _precondition_failed(ctx, state, position, warm_up_failed), None
                # The warm-up was cut short: the next shot of this process waits for a whole one, else
                # it would be timed warm after less preconditioning than its series promises.
                rewarm = not record["engine_died"] and position < ctx.job.series_length
                warm_up_failed = _precondition(ctx, state) if rewarm else None
            else:
                record = _run_shot(ctx, state, position)
            with _writable(journal):
                journal.append(record)
            shots.measured.append(record)
            served.append(record)
    finally:
        _stop(state)
    return served


# What a journal's shots must share with the series now asked for before a rerun resumes them: the
# settings its engine is started and asked with (measure.plan.settings_sha256: the plan's whole
# server settings, so a setting added later is in it too), and what no setting holds: the build, the
# model and draft model files, the GPUs. The settings named before the sha256 only make the line
# that says why clearer.
RESUME_IDENTITY = ("build_id", "model_sha256", "draft_model_sha256", "gpu_uuid", "output_tokens_requested",
                   "spec_params", "threads", "gpu_layers", "settings_sha256")  # fmt: skip


def _resumable(ctx: JobContext, journal: JsonlJournal) -> list[dict[str, Any]]:
    """The journal's shots if they are this series', else none: a journal of another identity is
    set aside (kept, renamed) and the series starts afresh."""
    records = journal.read_existing()
    differs = resume_mismatch(ctx, records)
    with _writable(journal):
        if differs:
            kept = journal.set_aside("stale")
            tell(f"whichshot: {ctx.job.job_id}: not resuming the {len(records)} shot(s) of an earlier "
                 f"attempt ({differs}); they are kept in {kept} and the series starts afresh")  # fmt: skip
            records = []
        journal.rewrite(records)
    return records


def resume_mismatch(ctx: JobContext, records: list[dict[str, Any]]) -> str | None:
    """What tells the journal's shots from this series' ('build_id a -> b'); None if nothing."""
    if not records:
        return None
    expected = _series_identity(ctx, 1)
    prompt_pins = {
        variant: _prompt_sha256(ctx, variant) for variant in {r.get("prompt_variant", "A") for r in records}
    }
    for record in records:
        for key in RESUME_IDENTITY:  # a key an older journal lacks differs too: it was not checked
            if record.get(key) != expected.get(key):
                return f"{key} {record.get(key)!r} -> {expected.get(key)!r}"
        variant = record.get("prompt_variant", "A")
        if record.get("prompt_sha256") and record["prompt_sha256"] != prompt_pins[variant]:
            return f"prompt_sha256 of variant {variant} differs"
    return None


def _prompt_sha256(ctx: JobContext, variant: str) -> str:
    return sha256_text(",".join(map(str, prompt_of(ctx, variant)["token_ids"])))


@contextlib.contextmanager
def _writable(journal: JsonlJournal) -> Iterator[None]:
    """A results disk that refuses a write stops the job with one line; written shots stay."""
    try:
        yield
    except OSError as exc:
        raise WhichshotError(
            f"cannot write {journal.partial_path}: {exc.strerror or exc}; the shots written "
            "before this are kept there and a rerun resumes from them"
        ) from None


def _start_reason(job: Job, position: int, engine_died: bool) -> str:
    if job.protocol == "cold":
        return "cold"
    if engine_died:
        return "after_engine_death"
    return "series_start" if position == 1 else "resumed"


# process_start_reason of a server whichshot attached to: it started nothing.
ATTACHED = "attached"


def _start(ctx: JobContext, seq: int, reason: str, replaced: int = 0) -> _ProcessState:
    log_path = ctx.log_dir / f"process{seq}.log"
    server = ctx.engine.start(ctx.build, ctx.model_path, ctx.settings, log_path)
    reason = ATTACHED if server.process is None else reason
    return _ProcessState(server, f"{ctx.job.job_id}/proc{seq}", reason, start_mark=_start_mark(server),
                         busy_replaced=replaced)  # fmt: skip


def _start_mark(server: RunningEngine) -> str | None:
    """When an attached server's process started, as it says (None: whichshot's own process, whose
    pid and spawn time tell it, or a server that does not say)."""
    read = getattr(server, "process_start_mark", None)
    return read() if server.process is None and read is not None else None


def _restarted(ctx: JobContext, state: _ProcessState, seq: int) -> _ProcessState | None:
    """The attached server's new process, where its start mark changed since the last shot (it
    restarted): the next shot is then shot 1 of that process, never a warm shot. None otherwise
    (or where it does not say: the caveat server_restart_undetectable tells)."""
    mark = _start_mark(state.server)
    if mark is None or state.start_mark is None or mark == state.start_mark:
        state.start_mark = state.start_mark or mark
        return None
    tell(f"whichshot: {ctx.job.job_id}: the attached server restarted ({state.start_mark} -> {mark}): "
         "its next shot is shot 1 of a new process")  # fmt: skip
    return _ProcessState(state.server, f"{ctx.job.job_id}/proc{seq}", ATTACHED, start_mark=mark,
                         busy_replaced=state.busy_replaced)  # fmt: skip


def _corpus_sha256(ctx: JobContext, job) -> str | None:
    """The pin of the text the prompt came from: the protocol grid's corpus, a workload's user
    files, a trace's file (None for a workload on built-in text or no document)."""
    # A prompts file made by hand (or before the pin was recorded) may not say: then it is unknown.
    if job.workload == BASE_WORKLOAD:
        return ctx.prompts.get("corpus_sha256")
    return user_source_pin(prompt_of(ctx, "A").get("source", {}))


def _corpus(ctx: JobContext, job: Job) -> str:
    if job.workload == BASE_WORKLOAD:
        return ctx.prompts["corpus"]
    return f"trace:{job.trace}" if job.trace else job.prompt_key


def output_length(ctx: JobContext) -> str:
    """fixed: the shot decodes exactly its output budget, EOS ignored; natural: the model may stop."""
    if ctx.job.workload == BASE_WORKLOAD:
        return "fixed"
    return prompt_of(ctx, "A").get("output_length", "natural")


def _output_budget(ctx: JobContext) -> int:
    if ctx.job.workload == BASE_WORKLOAD:
        return ctx.output_tokens
    return prompt_of(ctx, "A").get("max_output_tokens", ctx.output_tokens)


def _stop(state: _ProcessState | None) -> None:
    if state is not None:
        state.server.stop()


def prompt_of(ctx: JobContext, variant: str) -> dict[str, Any]:
    """The prompt (token ids and what they hold) of one variant of this job."""
    if ctx.job.workload == BASE_WORKLOAD:
        return ctx.prompts["prompts"][f"{ctx.job.prompt_tokens_requested}{variant}"]
    if ctx.job.workload == TRACE_WORKLOAD:
        return ctx.prompts["traces"][ctx.job.trace]["requests"][ctx.job.prompt_key]
    return ctx.prompts["workloads"][ctx.job.prompt_key]


class _EndMark:
    """A shot's end reading: taken as its stream ends (before any replay, /metrics read or log
    wait), or after the shot where no stream ended (a failure, an engine that does not say)."""

    def __init__(self, telemetry: ShotTelemetry) -> None:
        self.telemetry, self.taken = telemetry, False

    def take(self) -> None:
        self.telemetry.mark()
        self.taken = True


def _request(ctx: JobContext, variant: str, end_mark: _EndMark | None = None) -> ShotRequest:
    # continue_text decodes a fixed count (speed only); workloads stop where the model stops; a
    # trace does what its output_length says.
    return ShotRequest(
        prompt_token_ids=prompt_of(ctx, variant)["token_ids"],
        max_output_tokens=_output_budget(ctx),
        ignore_eos=output_length(ctx) == "fixed",
        timeout_s=ctx.shot_timeout_s,
        on_first_token=ctx.telemetry.mark_soon if ctx.telemetry is not None else None,
        on_last_token=end_mark.take if end_mark is not None else None,
    )


@dataclass(frozen=True)
class _WarmUpFailure:
    """A precondition shot that failed: its error and the window of the unmeasured warm-up."""

    error: str
    t_start_s: float
    t_end_s: float


def _precondition(ctx: JobContext, state: _ProcessState) -> _WarmUpFailure | None:
    """Unmeasured shots for `precondition_s` seconds: the fixed load the seed puts before timing.
    A failed one ends them and is returned (the caller records it in the next shot's place)."""
    t_start_s = time.monotonic()
    deadline = t_start_s + ctx.job.precondition_s
    while time.monotonic() < deadline:
        try:
            outcome = state.server.shot(_request(ctx, "A"))
        except (WhichshotError, requests.RequestException) as exc:
            state.shots_served += 1  # a request the process was sent: the record's shot index
            state.requests_served += 1
            return _WarmUpFailure(f"{type(exc).__name__}: {exc}", t_start_s, time.monotonic())
        state.shots_served += 1 + outcome.extra_requests
        state.requests_served += 1 + outcome.extra_requests
        state.precondition_shots += 1
    return None


def _precondition_failed(
    ctx: JobContext, state: _ProcessState, position: int, failure: _WarmUpFailure
) -> dict[str, Any]:
    """The record of a shot not sent because its process's warm-up failed: failed, with the warm-up's
    error and window. Kept like any shot, so a rerun resumes after it instead of failing again."""
    process = state.server.process
    died = process is not None and process.exited(grace_s=1.0)
    tell(f"whichshot: {ctx.job.job_id}: a precondition shot failed ({failure.error}); shot {position} "
         "is recorded as failed in its place and the series goes on")  # fmt: skip
    return {
        **_identity(ctx, state, position),
        "prompt_variant": ctx.job.prompt_variant(position),
        "prompt_sha256": _prompt_sha256(ctx, ctx.job.prompt_variant(position)),
        **empty_result_fields(),
        "status": "failed",
        "error": f"precondition shot failed, shot not sent: {failure.error}",
        "engine_died": died,
        "t_request_mono_s": failure.t_start_s,
        "t_end_mono_s": failure.t_end_s,
    }


def _run_shot(ctx: JobContext, state: _ProcessState, position: int) -> dict[str, Any]:
    state.shots_served += 1
    variant = ctx.job.prompt_variant(position)
    end_mark = _EndMark(ctx.telemetry) if ctx.telemetry is not None else None
    request = _request(ctx, variant, end_mark)
    record = _identity(ctx, state, position)
    record["prompt_variant"] = variant
    record["prompt_sha256"] = _prompt_sha256(ctx, variant)
    record["drafter_requests_seen"] = None if ctx.job.spec_mode == NO_DRAFT else state.requests_served
    state.requests_served += ctx.job.parallel_streams
    if ctx.telemetry is not None:
        ctx.telemetry.mark()
    process = state.server.process
    host_load = HostLoad(process.pid if process is not None else None)
    host_load.start()
    t_start_s = time.monotonic()
    try:
        outcomes = _send(ctx, state, request)
    except (WhichshotError, requests.RequestException) as exc:
        record.update(host_load.stop())
        # A dropped connection may come a moment before the process is seen dead: wait a little.
        lost = isinstance(exc, requests.RequestException)
        exited = process is not None and process.exited(grace_s=1.0 if lost else 0.0)
        died = isinstance(exc, EngineDied) or exited
        record.update(empty_result_fields())
        record.update(status="failed", error=f"{type(exc).__name__}: {exc}", engine_died=died)
        record.update(t_request_mono_s=t_start_s, t_end_mono_s=time.monotonic())
        return _with_telemetry(ctx, record, None, end_mark)
    record.update(host_load.stop())
    outcome = outcomes[0]  # stream 1 of N: its output and timings fill the one-request columns
    replays = sum(o.extra_requests for o in outcomes)  # a replay is a request served too
    state.shots_served += replays
    state.requests_served += replays
    record.update(client_fields(outcome, len(request.prompt_token_ids)))
    record.update(engine_fields(outcome))
    record.update(output_fields(outcome))
    prompt = prompt_of(ctx, variant)
    record.update(
        quality_fields(outcome.output_token_ids, outcome.output_text, request.prompt_token_ids, prompt)
    )
    record.update(stream_fields(outcomes, len(request.prompt_token_ids)))
    record.update(t_request_mono_s=min(o.t_request_s for o in outcomes),
                  t_end_mono_s=max(o.t_end_s for o in outcomes))  # fmt: skip
    record.update(status="ok", error=None, engine_died=False)
    return _with_telemetry(ctx, record, record["streams_output_tokens"], end_mark)  # all streams' tokens


def _send(ctx: JobContext, state: _ProcessState, request: ShotRequest) -> list[ShotOutcome]:
    """The shot's request, or the same request on every one of the series' streams at once; refused
    where an outcome cannot be this mode's shot timed by our clock (measure.refusals)."""
    if ctx.job.parallel_streams == ONE_STREAM:
        outcomes = [state.server.shot(request)]
    else:
        outcomes = state.server.shot_streams(request, ctx.job.parallel_streams)
    for outcome in outcomes:
        prefilled = (
            outcome.prompt_tokens_engine if outcome.prompt_built_by_engine else len(request.prompt_token_ids)
        )
        check_outcome(ctx.job.spec_mode, outcome, prefilled)
    return outcomes


def _with_telemetry(
    ctx: JobContext, record: dict, output_tokens: int | None, end_mark: _EndMark | None
) -> dict:
    """The shot's telemetry columns (end_mark: None exactly when the job has no telemetry)."""
    if end_mark is None:
        return record
    if not end_mark.taken:
        end_mark.take()
    window = (record["t_request_mono_s"], record["t_end_mono_s"])
    first_token_s = record.get("first_token_mono_s")
    record.update(end_mark.telemetry.summarize(*window, output_tokens, record["pid"], first_token_s))
    return record


def _identity(ctx: JobContext, state: _ProcessState, position: int) -> dict[str, Any]:
    """A shot's identity: the series' and the process that served it (an attached server's pid,
    start-up time and age are not measured: null)."""
    server = state.server
    process = server.process
    return {
        **_series_identity(ctx, position),
        "precondition_shots": state.precondition_shots,
        "engine_warmup_run": server.warmup_observed,  # what its log showed, not what the flag asked
        "process_id": state.process_id,
        "process_seq": int(state.process_id.rsplit("proc", 1)[1]),
        "process_start_reason": state.start_reason,
        "busy_replaced": state.busy_replaced,
        "pid": process.pid if process is not None else None,
        "engine_attached": process is None,
        "engine_process_start_mark": state.start_mark,
        "shot_index": state.shots_served,
        "process_ready_s": server.ready_s,
        "process_age_s": time.monotonic() - process.t_spawn_s if process is not None else None,
        "context_tokens_engine": server.context_tokens,
        "prompt_cache_state": server.prompt_cache,
        **_startup_facts(server),
    }


def _series_identity(ctx: JobContext, position: int) -> dict[str, Any]:
    """What a shot of this series is, whatever process serves it (or none, for a skipped request)."""
    job = ctx.job
    return {
        "schema_version": SCHEMA_VERSION,
        "job_id": job.job_id,
        "shot_id": f"{job.job_id}/shot{position}",
        **{axis: getattr(job, axis) for axis in AXES},
        # What the engine was started with (the job's value, by way of the server settings).
        "context_tokens_requested": ctx.settings.context_tokens,
        "engine_kind": ctx.engine.kind,
        "build_id": ctx.build["build_id"],
        "engine_dtype": ctx.build.get("dtype"),
        "model_sha256": ctx.model["sha256"],
        "model_file_type": ctx.model["metadata"]["file_type"],
        "model_weights": ctx.model.get("weights", "real"),
        **_input_identity(ctx),
        "prompt_tokens": len(prompt_of(ctx, job.prompt_variant(position))["token_ids"]),
        "spec_params": json.dumps(_mode_as_run(ctx), sort_keys=True),
        **ctx.engine.draft_limits(ctx.spec_params),
        "draft_model_sha256": ctx.draft_model["sha256"] if ctx.draft_model else None,
        "series_label": job.series_label,
        "repeat": job.repeat,
        "series_position": position,
        "series_length": job.series_length,
        "output_tokens_requested": _output_budget(ctx),
        "output_length": output_length(ctx),
        "wall_start_utc": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "threads": engine_threads(ctx),
        "gpu_layers": _gpu_layers(ctx),
        "settings_sha256": ctx.settings_sha256,
        **order_fields(ctx.place),
        **machine_identity(ctx),
    }


def _mode_as_run(ctx: JobContext) -> dict[str, Any]:
    """The mode's settings for the engine kind, with the draft model's name where it drafts with one."""
    if ctx.draft_model is None:
        return ctx.spec_params
    return {**ctx.spec_params, "draft_model": ctx.draft_model["name"]}


# Host identity columns that describe this machine's hardware: not the engine's where it runs elsewhere.
HARDWARE_IDENTITY = ("os", "cpu_model", "cpu_count", "gpu_uuid", "gpu_visible", "gpu_name", "gpu_driver",
                     "gpu_power_limit_w", "gpu_max_sm_clock_mhz")  # fmt: skip


def machine_identity(ctx: JobContext) -> dict[str, Any]:
    """The machine the engine ran on: this one's identity, or, for a server attached on another
    host, that host's name as the URL gives it and its hardware not measured (null)."""
    where = engine_host(ctx.build)
    identity = {**ctx.identity, "engine_host": where.host, "engine_on_this_machine": where.this_machine}
    if where.this_machine:
        return identity
    return {**identity, **dict.fromkeys(HARDWARE_IDENTITY), "hostname": where.host}


def engine_threads(ctx: JobContext) -> int | None:
    """The threads the engine was started with; None for a server whichshot attached to (its own)."""
    return None if attached(ctx.build) else ctx.settings.threads


def _gpu_layers(ctx: JobContext) -> int | None:
    """The layers the engine was told to offload to the GPU; None for an engine kind without the
    setting or a server whichshot attached to (its own)."""
    return None if attached(ctx.build) else ctx.settings.engine_spec.get("gpu_layers")


def _input_identity(ctx: JobContext) -> dict[str, Any]:
    """Which input the shot sent: its corpus (or trace) and the pin of the text it came from."""
    job = ctx.job
    return {
        "corpus": _corpus(ctx, job),
        "corpus_sha256": _corpus_sha256(ctx, job),
    }


def _skipped_record(ctx: JobContext, reason: str) -> dict[str, Any]:
    """The one row of a series whose request does not fit its context: it says why, and counts."""
    return {
        **_series_identity(ctx, 1),
        "prompt_variant": "A",
        "process_id": "",
        "process_seq": 0,
        "shot_index": 0,
        "engine_attached": not ctx.engine.starts_processes(ctx.settings.engine_spec),
        **empty_result_fields(),
        "status": "skipped",
        "error": f"skipped: {reason}",
        "engine_died": False,
    }


def _startup_facts(server: Any) -> dict[str, Any]:
    """What the engine said of its start-up (STARTUP_FACTS; None where an engine does not say)."""
    facts = getattr(server, "startup_facts", {})
    return {key: facts.get(key) for key in STARTUP_FACTS}
