"""How long the grid will take, stated before it runs: per series its rests, warm-up (precondition)
seconds, engine start-ups and shots (prompt and output tokens at a speed taken from an earlier
shots.parquet where one has the engine and model, else a stated default per engine kind).

    python -m whichshot.estimate --configfile config/full.yaml

An estimate, not a measurement: the shots' time is a guess from earlier speeds or defaults; the rests
and warm-up seconds are the config's own and exact. Model download, engine builds and llama-bench
brackets are not counted. A process that ran beside other work is re-run (measure.busy), up to
protocol.replace_busy per series: the most that can add is stated apart, a maximum, not a guess of
how often it happens."""

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from whichshot.engine import load_engine
from whichshot.measure.grid import Job, all_jobs
from whichshot.measure.looks import in_looks, looks_of
from whichshot.shots.axes import BASE_WORKLOAD, TRACE_WORKLOAD
from whichshot.snakemake_record import METADATA, params_as_recorded, record_of, recorded_params

DEFAULT_SHOTS = Path("results/shots.parquet")
TRACE_OUTPUT_TOKENS = 256  # a trace request's output budget when the config gives none


@dataclass(frozen=True)
class Speeds:
    """The speeds a series is estimated at, and where they come from."""

    prefill_tok_s: float
    decode_tok_s: float
    startup_s: float  # spawn to ready, per process
    source: str


# Stated defaults per engine kind where no earlier result has the engine and model: a small model
# on a few CPU cores for llama.cpp (results/reference/cpu_default measured 220-610 tok/s prefill,
# 27-68 tok/s decode, under 1 s to ready on 2 cores), slower for transformers, a server's start-up
# (weights loaded onto a GPU) for an OpenAI-compatible engine.
DEFAULT_SPEEDS = {
    "llama_cpp": Speeds(250.0, 30.0, 2.0, "default for llama_cpp"),
    "transformers": Speeds(100.0, 10.0, 15.0, "default for transformers"),
    "openai": Speeds(2000.0, 50.0, 120.0, "default for openai"),
}
FALLBACK_SPEEDS = Speeds(100.0, 10.0, 30.0, "default for an unknown engine kind")


@dataclass(frozen=True)
class SeriesEstimate:
    """One series' estimated seconds, by part."""

    job: Job
    processes: int
    rests: int
    rest_s: float  # rests × the job's rest (exact)
    precondition_s: float  # warm-up before timing, once per warm process (exact)
    startup_s: float
    shots_s: float
    speeds: Speeds
    replace_processes: int = 0  # the most processes that can be re-run because other work ran beside them

    @property
    def total_s(self) -> float:
        return self.rest_s + self.precondition_s + self.startup_s + self.shots_s

    @property
    def replace_s(self) -> float:
        """The most seconds the re-run processes can add: each as long as one of the series' own (a
        cold series' process is one start and one shot; a warm series' is the whole series)."""
        return self.replace_processes * self.total_s / self.processes if self.processes else 0.0


def earlier_speeds(shots: pd.DataFrame) -> dict[tuple[str, str], Speeds]:
    """Median ok-shot prefill and decode speed and spawn-to-ready time per (engine, model)."""
    ok = shots[shots["status"] == "ok"]
    found = {}
    for (engine, model), rows in ok.groupby(["engine", "model"]):
        prefill, decode = rows["prefill_tok_s"].median(), rows["decode_tok_s"].median()
        ready = rows.drop_duplicates("process_id")["process_ready_s"].median()
        if pd.notna(prefill) and pd.notna(decode) and decode > 0 and prefill > 0:
            startup = (
                float(ready) if pd.notna(ready) else DEFAULT_SPEEDS.get(engine, FALLBACK_SPEEDS).startup_s
            )
            found[(engine, model)] = Speeds(float(prefill), float(decode), startup, "earlier shots.parquet")
    return found


def estimate_series(config: dict[str, Any], shots: pd.DataFrame | None = None) -> list[SeriesEstimate]:
    """Every series of the config (grid.all_jobs) with its estimated seconds."""
    measured = earlier_speeds(shots) if shots is not None and len(shots) else {}
    return [_estimate(config, job, measured) for job in all_jobs(config)]


def _estimate(config: dict[str, Any], job: Job, measured: dict[tuple[str, str], Speeds]) -> SeriesEstimate:
    spec = config["engines"][job.engine]
    kind = spec["kind"]
    speeds = measured.get((job.engine, job.model)) or DEFAULT_SPEEDS.get(kind, FALLBACK_SPEEDS)
    processes = job.series_length if job.protocol == "cold" else 1
    if not load_engine(kind).starts_processes(spec):
        processes = 0  # a server already running: nothing to start
    rests = job.series_length - 1 if job.protocol == "warm" and job.rest_s > 0 else 0
    prompt_tokens, output_tokens = _tokens(config, job)
    shot_s = prompt_tokens / speeds.prefill_tok_s + output_tokens / speeds.decode_tok_s
    return SeriesEstimate(
        job=job,
        processes=processes,
        rests=rests,
        rest_s=rests * job.rest_s,
        precondition_s=job.precondition_s if job.protocol == "warm" else 0.0,
        startup_s=processes * speeds.startup_s,
        shots_s=job.series_length * shot_s,
        speeds=speeds,
        # Only a process whichshot started can be replaced (an attached server's load is not seen).
        replace_processes=config["protocol"]["replace_busy"] if processes else 0,
    )


def _tokens(config: dict[str, Any], job: Job) -> tuple[int, int]:
    """(prompt, output) tokens of one shot: the grid's own, a workload's document and output budget
    (an upper bound: the model may stop earlier), a trace request's context and output budget."""
    workloads = config.get("workloads") or {}
    if job.workload == BASE_WORKLOAD:
        return int(job.prompt_tokens_requested or 0), int(config["protocol"]["output_tokens"])
    if job.workload == TRACE_WORKLOAD:
        output = workloads.get("max_output_tokens") or TRACE_OUTPUT_TOKENS
        return int(job.context_tokens_requested // 2), int(output)
    return int(workloads.get("document_tokens") or 0), int(workloads.get("max_output_tokens") or 0)


def duration_words(seconds: float) -> str:
    """'1 h 05 min', '12 min', '40 s'."""
    if seconds < 60:
        return f"{math.ceil(seconds)} s"
    minutes = math.ceil(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def summary_lines(config: dict[str, Any], estimates: list[SeriesEstimate], finished: int = 0) -> list[str]:
    """The estimate in words: the total with its parts, then one line per engine, model and part;
    `finished` series (their shots on disk) are not among the estimates and are said apart."""
    run = config.get("run_id", "run")
    on_disk = f"{finished} series have their shots on disk, measured as now planned (results/shots/)"
    if not estimates:
        return [f"{run}: nothing to measure: all {on_disk}" if finished else f"{run}: no series"]
    total = sum(e.total_s for e in estimates)
    parts = {
        "rests": sum(e.rest_s for e in estimates),
        "warm-up before timing": sum(e.precondition_s for e in estimates),
        "engine start-ups": sum(e.startup_s for e in estimates),
        "shots": sum(e.shots_s for e in estimates),
    }
    rests = sum(e.rests for e in estimates)
    lines = [
        f"{run}: {len(estimates)} series, about {duration_words(total)} of measuring "
        f"({', '.join(f'{name} {duration_words(s)}' for name, s in parts.items())}; {rests} rests, "
        f"{sum(e.processes for e in estimates)} processes, {sum(e.job.series_length for e in estimates)} "
        "shots)"
    ]
    groups: dict[tuple[str, str, str], list[SeriesEstimate]] = {}
    for e in estimates:
        part = "protocol grid" if e.job.workload == BASE_WORKLOAD else e.job.workload
        groups.setdefault((e.job.engine, e.job.model, part), []).append(e)
    for (engine, model, part), group in groups.items():
        speeds = group[0].speeds
        lines.append(
            f"  {engine} {model} {part}: {len(group)} series, "
            f"{duration_words(sum(e.total_s for e in group))} "
            f"(prefill {speeds.prefill_tok_s:.0f} tok/s, decode {speeds.decode_tok_s:.0f} tok/s, "
            f"{speeds.startup_s:.1f} s to ready: {speeds.source})"
        )
    lines.append(_replace_words(config, estimates))
    lines += _looks_words(config, estimates)
    lines.append(
        "  not counted: "
        + (f"{on_disk}, " if finished else "")
        + "model downloads, engine builds, llama-bench brackets, verify probes, the report"
    )
    return lines


def _replace_words(config: dict[str, Any], estimates: list[SeriesEstimate]) -> str:
    """The most the re-run of busy processes can add (protocol.replace_busy per series)."""
    limit = config["protocol"]["replace_busy"]
    if not limit:
        return "  busy processes are not re-run (protocol.replace_busy: 0)"
    processes = sum(e.replace_processes for e in estimates)
    return (
        f"  at most {processes} more processes and {duration_words(sum(e.replace_s for e in estimates))} "
        f"more if other work runs beside every process (protocol.replace_busy: {limit} per series); "
        "none on a quiet machine"
    )


def _looks_words(config: dict[str, Any], estimates: list[SeriesEstimate]) -> list[str]:
    """Where the grid runs until decided: the estimate counts every look (the most the run can take),
    and what the first look alone takes."""
    looks = looks_of(config["protocol"])
    if looks is None:
        return []
    looked = [e for e in estimates if in_looks(e.job, config["protocol"])]
    first = [e for e in looked if e.job.repeat <= looks.counts[0]]
    cap = f", or a cell's {looks.max_seconds:g} s" if looks.max_seconds is not None else ""
    return [
        f"  run until decided (protocol.until_decided, looks {list(looks.counts)}{cap}): the most, every "
        f"look: {len(looked)} grid series, {duration_words(sum(e.total_s for e in looked))}; the first look "
        f"alone: {len(first)} series, {duration_words(sum(e.total_s for e in first))}; a cell stops earlier "
        "once its verdicts decide"
    ]


def estimate_words(
    config: dict[str, Any], shots_path: Path = DEFAULT_SHOTS, finished: frozenset[str] = frozenset()
) -> str:
    """The estimate of a checked config, at the speeds of `shots_path` where it exists, less the
    `finished` series (job ids whose shots are on disk: what a dry run of the workflow prints)."""
    shots = pd.read_parquet(shots_path) if Path(shots_path).exists() else None
    estimates = [e for e in estimate_series(config, shots) if e.job.job_id not in finished]
    return "\n".join(summary_lines(config, estimates, len(finished)))


def still_finished(shots_file: Path, plan: dict[str, Any], metadata_dir: Path = METADATA) -> bool:
    """Whether a series needs no measuring again, as Snakemake will judge it: its shots are on disk
    and the plan they were measured with (Snakemake's record of run_series's params) is this one. A
    record that is gone leaves the series as it is (Snakemake then reruns nothing for its params)."""
    if not shots_file.exists():
        return False
    record = record_of(shots_file, metadata_dir)
    return record is None or recorded_params(record) == params_as_recorded(plan)
