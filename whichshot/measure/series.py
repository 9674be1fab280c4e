"""A series with its telemetry: one sampler for the whole job; each shot gets a summary."""

import contextlib
import functools
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whichshot.atomic import JsonlJournal, promote_together, write_json_atomic
from whichshot.engine.engine_host import engine_host
from whichshot.engine.machine_lock import measurement_lock
from whichshot.engine.process import process_tree
from whichshot.host import host_identity
from whichshot.measure.bench import bench_record, bracketed, plan_for
from whichshot.measure.grid import all_jobs
from whichshot.measure.order import run_order
from whichshot.measure.peer import peer_step
from whichshot.measure.placement import check_on_its_node
from whichshot.measure.plan import SeriesInputs, engine_of_plan, job_context
from whichshot.measure.progress import grid_progress
from whichshot.measure.protocol import JobContext, SeriesShots, measure_job
from whichshot.measure.verify_cost import run_verify_probe, verify_plan
from whichshot.measure.verify_probe import verify_probe_step
from whichshot.telemetry import NO_NVML, TelemetryRecorder, close_backends, open_backends, summarize_shot
from whichshot.telemetry.base import FALLBACK, NOT_READABLE, SAMPLE_COLUMNS
from whichshot.telemetry.gpus import NOT_OUR_PROCESS, GpuChoice, check_engine_gpus
from whichshot.telemetry.nvml import running_pids_by_uuid
from whichshot.tell import tell


class RecorderTelemetry:
    """The protocol's per-shot telemetry hooks on top of one TelemetryRecorder; which GPUs it
    samples, and whether NVML sees each engine process on them."""

    def __init__(
        self,
        recorder: TelemetryRecorder,
        caveats: list[dict[str, str]],
        gpus: GpuChoice = NO_NVML,
        engine_elsewhere: str | None = None,
    ) -> None:
        self.recorder = recorder
        self.gpus = gpus
        self._gpu_checks: dict[int, str] = {}
        unreadable = {c["sensor"] for c in caveats if c["id"] == NOT_READABLE}
        if engine_elsewhere is not None:  # no sampler here reads that host
            unreadable.add(f"every sensor: the engine runs on {engine_elsewhere}, not this machine")
        self.not_measured = "|".join(sorted(unreadable)) or None
        fallbacks = {f"{c['sensor']}: {c['reason']}" for c in caveats if c["id"] == FALLBACK}
        self.fallbacks = "|".join(sorted(fallbacks)) or None

    def mark(self) -> None:
        self.recorder.mark()

    def mark_soon(self) -> None:
        self.recorder.mark_soon()

    def summarize(
        self,
        t_start_s: float,
        t_end_s: float,
        output_tokens: int | None,
        engine_pid: int | None,
        first_token_s: float | None = None,
    ) -> dict:
        """The shot's telemetry columns; with the first token's time (first_token_mono_s) its
        energy is split into prefill and decode too."""
        samples = self.recorder.samples_around(t_start_s, t_end_s)
        summary = summarize_shot(samples, t_start_s, t_end_s, output_tokens, first_token_s)
        return {
            **summary,
            "telemetry_gpus": "|".join(self.gpus.uuids) or None,
            "telemetry_gpu_choice": self.gpus.problem or self.gpus.how,
            "telemetry_gpu_check": self.gpu_check(engine_pid),
            "telemetry_not_measured": self.not_measured,
            "telemetry_fallbacks": self.fallbacks,
            "telemetry_gaps": shot_gaps(self.recorder.gaps, samples, t_start_s, t_end_s),
        }

    def gpu_check(self, engine_pid: int | None) -> str | None:
        """Where NVML's process lists put this engine process (once per process)."""
        if not self.gpus.uuids:
            return None
        if engine_pid is None:
            return NOT_OUR_PROCESS
        if engine_pid not in self._gpu_checks:
            pids = {process.pid for process in process_tree(engine_pid)}
            self._gpu_checks[engine_pid] = check_engine_gpus(self.gpus.uuids, pids, running_pids_by_uuid())
        return self._gpu_checks[engine_pid]


def shot_gaps(
    gaps: list[dict[str, Any]], samples: list[dict], t_start_s: float, t_end_s: float
) -> str | None:
    """'|'-joined 'backend.sensor: error' for sensors that failed mid-run and gave no reading in
    this shot from the failure on (a sensor that came back before the shot is not listed)."""
    failed = set()
    for gap in gaps:
        sensor, onset_s = gap["sensor"], gap["t_mono_s"]
        if onset_s > t_end_s:
            continue
        if sensor in SAMPLE_COLUMNS:
            later = [s[sensor] for s in samples if s["t_mono_s"] >= max(onset_s, t_start_s)]
            if any(value is not None for value in later):
                continue
        elif onset_s < t_start_s:
            continue
        failed.add(f"{gap['backend']}.{sensor}: {gap['error']}")
    return "|".join(sorted(failed)) or None


def run_series_with_telemetry(
    ctx: JobContext, shots_path: Path, telemetry_path: Path, telemetry: dict[str, Any]
) -> SeriesShots:
    """Run the job's shots under the sampler. This attempt's samples, tagged with its own shots and
    processes, join the telemetry journal (an earlier attempt's stay in it); neither journal is
    promoted here (measure_series does, last)."""
    where = engine_host(ctx.build)
    names = telemetry["backends"] if where.this_machine else ["none"]  # this machine's sensors: not its
    backends, caveats, gpus = open_backends(names, ctx.engine.gpu_use(ctx.build, ctx.settings))
    recorder = TelemetryRecorder(backends, interval_s=telemetry["interval_s"])
    elsewhere = None if where.this_machine else where.host
    ctx.telemetry = RecorderTelemetry(recorder, caveats, gpus, engine_elsewhere=elsewhere)
    shots = SeriesShots()
    try:
        with recorder:
            measure_job(ctx, JsonlJournal(shots_path), shots)
    finally:
        close_backends(backends)
        failing = sys.exc_info()[0] is not None
        # On the way out of a failure (a full disk, say) that failure is the one to tell, not this.
        with contextlib.suppress(OSError) if failing else contextlib.nullcontext():
            _keep_samples(ctx.job.job_id, recorder, JsonlJournal(telemetry_path), shots)
    return shots


def _keep_samples(
    job_id: str, recorder: TelemetryRecorder, journal: JsonlJournal, shots: SeriesShots
) -> None:
    """This attempt's samples, tagged with its own shots, appended to the telemetry journal; set
    aside first the samples of an earlier attempt none of whose shots was kept."""
    if shots.resumed is None:
        return  # the shots' journal was never read: nothing of this attempt to keep
    if not shots.resumed:
        journal.set_aside("stale")
    samples = recorder.samples_between(-math.inf, math.inf)
    journal.append_all([tag_sample(job_id, s, shots.measured) for s in samples])


@dataclass(frozen=True)
class SeriesOutputs:
    """The files one series job writes (the rule's outputs)."""

    shots: Path
    telemetry: Path
    bench: Path


def measure_series(
    ctx: JobContext, outputs: SeriesOutputs, telemetry: dict[str, Any], bench: dict[str, Any]
) -> None:
    """The whole job: the series under its telemetry, bracketed by llama-bench (a drafted series
    followed by its verification-cost probe, a warm one by the peer client's run), holding the
    series' journal and the machine's measurement lock; the journals get their final names last
    (promote_together: the shots first, each journal kept until both have theirs), so a failure
    before that (a kill in the after-bracket, a full disk for bench.json, a kill between the two
    renames) leaves every finished shot and sample to the rerun."""
    plan, not_run = plan_for(ctx, bench)
    with JsonlJournal(outputs.shots).locked(), measurement_lock():
        shots = functools.partial(run_series_with_telemetry, ctx, outputs.shots, outputs.telemetry, telemetry)
        series, brackets = bracketed(plan, shots)
        verify = run_verify_probe(*verify_plan(ctx, series.records, bench))
        steps = verify_probe_step(ctx, series.records, bench)
        peer = peer_step(ctx, bench.get("peer_client"))
        record = {**bench_record(ctx, plan, not_run, brackets), "verify_cost": verify, "verify_probe": steps,
                  "peer_client": peer}  # fmt: skip
        write_json_atomic(outputs.bench, record)
        promote_together([JsonlJournal(outputs.shots), JsonlJournal(outputs.telemetry)])


def run_planned_series(
    plan: dict[str, Any], inputs: SeriesInputs, outputs: SeriesOutputs, config: dict[str, Any]
) -> None:
    """A run_series job: the series its plan (measure.plan) describes, its engine's secrets from the
    config, on its node, with each shot's place in the grid (every series of the run) told as it
    starts, and the series' place in the run's order (measure.order) recorded in every shot."""
    identity = host_identity()
    ctx = job_context(plan, inputs, identity, engine_of_plan(plan, config), config["server"])
    grid = all_jobs(config)
    ctx.place = run_order(grid)[ctx.job.job_id]
    check_on_its_node(ctx.job, identity["slurm_node"], identity["hostname"])
    progress = grid_progress(grid, outputs.shots.parent)
    job = ctx.job
    ctx.progress = lambda position: tell(progress.line(job.job_id, position, job.series_length))
    measure_series(ctx, outputs, plan["telemetry"], plan["bench"])


def tag_sample(job_id: str, sample: dict[str, Any], shots: list[dict[str, Any]]) -> dict:
    """The sample with the job, and the shot and process whose window holds it (else None); pass
    only the shots measured with this sampler (an earlier attempt's windows are on another clock)."""
    t_s = sample["t_mono_s"]
    timed = [s for s in shots if s.get("t_request_mono_s") is not None]  # a skipped request never ran
    inside = next((s for s in timed if s["t_request_mono_s"] <= t_s <= s["t_end_mono_s"]), None)
    return {
        "job_id": job_id,
        "shot_id": inside["shot_id"] if inside else None,
        "process_id": inside["process_id"] if inside else None,
        **sample,
    }
