"""The grid: config -> the list of series (jobs) it expands to. One job is one JSONL file.

Axes: engine x model x prompt length x protocol (cold; warm x rest) x context window x
prompt order x preconditioning (warm only) x prefill chunk x parallel streams x repeat, and the
node where a run compares nodes (placement.compare_nodes). Every control of seed 000 is an axis
here, and seed 002's concurrency. An engine whichshot does not start (a server it attaches to) runs
no cold series: it cannot be given a fresh process.
"""

import itertools
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from whichshot.engine import load_engine
from whichshot.engine.base import compile_caches
from whichshot.measure.looks import grid_repeats
from whichshot.prepare.traces import load_traces
from whichshot.prepare.workload_prompts import workload_keys
from whichshot.prepare.workloads import DOCUMENT_WORKLOADS
from whichshot.shots.axes import (
    AXES,
    AXIS,
    AXIS_TABLE,
    BASE_WORKLOAD,
    DEFAULT_COMPILE_CACHE,
    DEFAULT_PREFILL_CHUNK,
    DEFAULT_WARMUP,
    FRESH_PROCESS,
    NO_DRAFT,
    ONE_STREAM,
    ORDERS,
    TRACE_WORKLOAD,
)
from whichshot.spec_modes import applies


@dataclass(frozen=True, kw_only=True)
class Job:
    """One series of shots under one protocol, run start to finish by one Snakemake job. Its fields
    are the shots' axis columns (whichshot.shots.axes) plus the repeat and the series length."""

    engine: str
    model: str
    workload: str = BASE_WORKLOAD
    text_kind: str = "real"
    prompt_tokens_requested: int | None = None  # the grid's prompt length; None for a workload's text
    protocol: str  # "cold": a fresh process per shot; "warm": consecutive shots in one process
    rest_s: float = 0.0
    precondition_s: float = 0.0
    context_tokens_requested: int
    order: str = "same"
    spec_mode: str = NO_DRAFT
    engine_warmup: str = DEFAULT_WARMUP
    trace: str | None = None  # the trace and request of a trace job (None elsewhere)
    request_id: str | None = None
    prefill_chunk_tokens: int = DEFAULT_PREFILL_CHUNK  # tokens per prefill step (llama.cpp -ub)
    parallel_streams: int = ONE_STREAM  # requests in flight at once against one process of this many slots
    node_requested: str | None = None  # the cluster node a node comparison runs this series on
    compile_cache: str = DEFAULT_COMPILE_CACHE  # the compile cache each process starts with
    repeat: int
    series_length: int

    @property
    def job_id(self) -> str:
        return job_id(self)

    @property
    def series_label(self) -> str:
        """The grid cell this series measures: its id without the repeat."""
        return job_id(self, with_repeat=False)

    @property
    def prompt_key(self) -> str:
        """Key of this job's prompt in the prompts file (a trace request's: under its trace)."""
        return self.request_id if self.trace else f"{self.workload}-{self.text_kind}"

    def fresh_process_before(self, position: int) -> bool:
        """Whether shot `position` (1-based) of the series must be the first of a new process."""
        return self.protocol == "cold" or position == 1

    def prompt_variant(self, position: int) -> str:
        """Which prompt variant shot `position` sends."""
        variants = ORDERS[self.order]
        return variants[(position - 1) % len(variants)]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def job_id(job: Job, with_repeat: bool = True) -> str:
    """The series' id, which names its shot file: dot-separated parts, each left out at the value
    runs had before its axis existed, so that their ids stay as they were and those runs resume.
    The protocol grid's series name their prompt length, warm-up shots, order and load; a workload's
    or a trace request's name the text and the speculative mode instead."""
    grid = job.workload == BASE_WORKLOAD
    if job.trace:
        text = f"trace-{job.trace}-{job.request_id}"
    else:
        text = _part("prompt_tokens_requested", job) if grid else f"{job.workload}-{job.text_kind}"
    shape = "cold" if job.protocol == "cold" else f"warm-rest{_seconds(job.rest_s)}s"
    if grid and job.protocol != "cold":
        shape += f"-pre{_seconds(job.precondition_s)}s"
    parts = [job.engine, job.model, text, shape, _part("context_tokens_requested", job)]
    parts.append(job.order if grid else job.spec_mode)
    # engine_warmup is the one axis whose cell-id part has no prefix and is never left out.
    parts.append("" if job.engine_warmup == DEFAULT_WARMUP else f"warmup-{job.engine_warmup}")
    parts += [_part(axis, job) for axis in _LATER_AXES]  # at their defaults in workloads and traces
    parts.append(f"rep{job.repeat}" if with_repeat else "")
    return ".".join(part for part in parts if part)


# The axes added after the warm-up, in the table's order (a new one joins the ids by itself): each
# named by its prefix, left out at its default.
_LATER_AXES = [axis.name for axis in AXIS_TABLE[AXES.index("engine_warmup") + 1 :] if axis.prefix]


def _part(axis: str, job: Job) -> str:
    value, spec = getattr(job, axis), AXIS[axis]
    return "" if value is None or value == spec.unnamed else f"{spec.prefix}{value}"


def _seconds(value: float) -> str:
    return f"{value:g}".replace(".", "p")  # 0.5 -> "0p5": the id's dots separate its parts


def _series_kinds(protocol: dict[str, Any]) -> list[dict[str, Any]]:
    """The series shapes in config: the Job fields of each (protocol, rest, warm-up shots, length)."""
    kinds = []
    if protocol["cold_processes"] > 0:
        kinds.append({**FRESH_PROCESS, "series_length": protocol["cold_processes"]})
    if protocol["warm_shots"] > 0:
        for rest_s, pre_s in itertools.product(protocol["rests_s"], protocol["precondition_s"]):
            shape = {"protocol": "warm", "rest_s": float(rest_s), "precondition_s": float(pre_s)}
            kinds.append({**shape, "series_length": protocol["warm_shots"]})
    return kinds


def expand_jobs(config: dict[str, Any]) -> list[Job]:
    """The full product of the axes, in a stable order (config order on every axis)."""
    protocol = config["protocol"]
    axes = itertools.product(
        protocol_engines(config),
        protocol_models(config),
        config["prompts"]["lengths"],
        _series_kinds(protocol),
        protocol["context_tokens"],
        protocol["orders"],
        protocol["engine_warmup"],
        protocol["prefill_chunk_tokens"],
        protocol["parallel_streams"],
        dict.fromkeys([*protocol["compile_caches"], DEFAULT_COMPILE_CACHE]),
        range(1, grid_repeats(protocol) + 1),  # every look's series where the grid runs in looks
    )
    runs = _runnable(config)
    return [
        Job(engine=engine, model=model, prompt_tokens_requested=length, **kind,
            context_tokens_requested=context, order=order, engine_warmup=warmup, prefill_chunk_tokens=chunk,
            parallel_streams=streams, compile_cache=cache, repeat=repeat)
        for engine, model, length, kind, context, order, warmup, chunk, streams, cache, repeat in axes
        if runs(engine, kind) and cache in engine_compile_caches(config, engine, kind["protocol"])
    ]  # fmt: skip


def engine_compile_caches(config: dict[str, Any], engine: str, protocol: str) -> list[str]:
    """The compile caches this engine's series of this protocol start processes with: a cold series
    each of the protocol's that its kind has (engine.base.compile_caches); a warm series, and a kind
    without a compile cache (nothing to compile), the engine's default alone: only the first shot
    of a process could tell them apart."""
    offered = compile_caches(load_engine(config["engines"][engine]["kind"]))
    asked = config["protocol"]["compile_caches"] if protocol == "cold" else []
    return [value for value in asked if value in offered] or [DEFAULT_COMPILE_CACHE]


def _runnable(config: dict[str, Any]) -> Callable[[str, dict[str, Any]], bool]:
    """(engine, series shape) -> whether the engine can run it: cold only where whichshot starts it."""
    engines = config["engines"]
    starts = {name: load_engine(spec["kind"]).starts_processes(spec) for name, spec in engines.items()}

    def runs(engine: str, shape: dict[str, Any]) -> bool:
        return starts[engine] or shape["protocol"] != "cold"

    return runs


def measured_models(config: dict[str, Any]) -> list[str]:
    """Models in the grid (a donor-only model has measure: false)."""
    return [name for name, spec in config["models"].items() if spec["measure"]]


def protocol_engines(config: dict[str, Any]) -> list[str]:
    """Engines that run the protocol grid."""
    return config["protocol"]["engines"] or list(config["engines"])


def workload_engines(config: dict[str, Any]) -> list[str]:
    """Engines that run the workloads and the traces."""
    return config["workloads"]["engines"] or list(config["engines"])


def protocol_models(config: dict[str, Any]) -> list[str]:
    """Models that run the protocol grid."""
    return config["protocol"]["models"] or measured_models(config)


def workload_models(config: dict[str, Any]) -> list[str]:
    """Models that run the workloads (none when no workload is asked for)."""
    if not config["workloads"]["names"]:
        return []
    return config["workloads"]["models"] or measured_models(config)


def expand_workload_jobs(config: dict[str, Any]) -> list[Job]:
    """engines x models x (workload, text kind) x speculative modes x {cold; warm} x repeats."""

    workloads = config["workloads"]
    context = workloads["context_tokens"]

    def job(engine, model, key, mode, shape, warmup, repeat) -> Job:
        workload, kind = key
        length = workloads["document_tokens"] if workload in DOCUMENT_WORKLOADS else None
        return Job(engine=engine, model=model, workload=workload, text_kind=kind,
                   prompt_tokens_requested=length, **shape, context_tokens_requested=context, spec_mode=mode,
                   engine_warmup=warmup, repeat=repeat)  # fmt: skip

    keys = workload_keys(workloads["names"], workloads["text_kinds"])
    return _request_jobs(config, workload_models(config), keys, job)


def trace_models(config: dict[str, Any], name: str) -> list[str]:
    """Models that run trace `name`."""
    return config["traces"][name]["models"] or measured_models(config)


def expand_trace_jobs(config: dict[str, Any]) -> list[Job]:
    """engines x models x trace requests x speculative modes x {cold; warm} x repeats: each request
    is a cell of its own, run as the workloads are (their series lengths, one rest)."""

    jobs = []
    for name, trace in load_traces(config).items():
        context = config["traces"][name]["context_tokens"]

        def job(engine, model, request, mode, shape, warmup, repeat, name=name, context=context) -> Job:
            return Job(engine=engine, model=model, workload=TRACE_WORKLOAD, text_kind=request.text_kind,
                       **shape, context_tokens_requested=context, spec_mode=mode, engine_warmup=warmup,
                       trace=name, request_id=request.request_id, repeat=repeat)  # fmt: skip

        jobs += _request_jobs(config, trace_models(config, name), trace.requests, job)
    return jobs


def _request_jobs(config: dict[str, Any], models: list[str], items, make) -> list[Job]:
    """engines x models x items (workloads, trace requests) x every mode that applies to the engine x
    {cold; warm at the first rest} x repeats, with the workloads' series lengths."""
    protocol = workload_protocol(config)
    shapes = _series_kinds({**protocol, "rests_s": protocol["rests_s"][:1], "precondition_s": [0]})
    modes = config["spec_modes"]
    axes = itertools.product(workload_engines(config), models, items, modes, shapes,
                             protocol["engine_warmup"], range(1, protocol["repeats"] + 1))  # fmt: skip
    runs = _runnable(config)
    # A mode without settings for an engine's kind is skipped there, never run as no drafting.
    return [make(*combination) for combination in axes
            if applies(modes[combination[3]], config["engines"][combination[0]]["kind"])
            and runs(combination[0], combination[4])]  # fmt: skip


def all_jobs(config: dict[str, Any]) -> list[Job]:
    """Every series of the run: the protocol grid, the workloads and the traces (on each compared
    node where the run compares nodes)."""
    jobs = expand_jobs(config) + expand_workload_jobs(config) + expand_trace_jobs(config)
    placement = config.get("placement", {})
    return on_nodes(jobs, placement["nodes"]) if placement.get("compare_nodes") else jobs


def on_nodes(jobs: list[Job], nodes: list[str]) -> list[Job]:
    """Every series once per node, the node an axis."""
    return [replace(job, node_requested=node) for job in jobs for node in nodes]


def workload_protocol(config: dict[str, Any]) -> dict[str, Any]:
    """The protocol the workloads (and traces) run: the grid's, with the series lengths and repeats
    the workloads section sets apart."""
    workloads = config["workloads"]
    keys = ("cold_processes", "warm_shots", "repeats")
    return {**config["protocol"], **{key: workloads[key] for key in keys if workloads.get(key) is not None}}


def job_by_id(config: dict[str, Any], job_id: str) -> Job:
    """Look a job up by its id (raises KeyError for an id the config does not produce)."""
    for job in all_jobs(config):
        if job.job_id == job_id:
            return job
    raise KeyError(job_id)
