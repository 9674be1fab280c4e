"""The grid: config -> the list of series (jobs) it expands to. One job is one JSONL file.

Axes: engine x model x prompt length x protocol (cold; warm x rest) x context window x
prompt order x preconditioning (warm only) x prefill chunk x parallel streams x repeat, and the
node where a run compares nodes (placement.compare_nodes). Every control of seed 000 is an axis
here, and seed 002's concurrency.
"""

import itertools
from dataclasses import asdict, dataclass, replace
from typing import Any

from whichshot.shots.axes import (
    BASE_WORKLOAD,
    DEFAULT_PREFILL_CHUNK,
    DEFAULT_WARMUP,
    NO_DRAFT,
    ONE_STREAM,
    TRACE_WORKLOAD,
)
from whichshot.spec_modes import applies

# Prompt variants a series cycles through, by order: "same" repeats A; the seed's reversal
# control runs A,B,A,B... against B,A,B,A... so that a shot's position and its prompt separate.
ORDERS = {"same": ("A",), "forward": ("A", "B"), "reverse": ("B", "A")}


@dataclass(frozen=True)
class Job:
    """One series of shots under one protocol, run start to finish by one Snakemake job."""

    job_id: str
    engine: str
    model: str
    prompt_tokens: int | None  # the grid's prompt length; None for a workload of fixed text
    protocol: str  # "cold": a fresh process per shot; "warm": consecutive shots in one process
    rest_s: float
    context_tokens: int
    order: str
    precondition_s: float
    repeat: int
    series_length: int
    workload: str = BASE_WORKLOAD
    text_kind: str = "real"
    spec_mode: str = NO_DRAFT
    engine_warmup: str = DEFAULT_WARMUP
    trace: str | None = None  # the trace and request of a trace job (None elsewhere)
    request_id: str | None = None
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK  # tokens per prefill step (llama.cpp -ub)
    streams: int = ONE_STREAM  # requests in flight at once against one process of this many slots
    node: str | None = None  # the cluster node a node comparison runs this series on (else None)

    @property
    def prompt_key(self) -> str:
        """Key of this job's prompt in the prompts file (a trace request's: under its trace)."""
        return self.request_id if self.trace else f"{self.workload}-{self.text_kind}"

    @property
    def series_label(self) -> str:
        """The grid cell this series measures: its id without the repeat."""
        return self.job_id.rsplit(".rep", 1)[0]

    def fresh_process_before(self, position: int) -> bool:
        """Whether shot `position` (1-based) of the series must be the first of a new process."""
        return self.protocol == "cold" or position == 1

    def prompt_variant(self, position: int) -> str:
        """Which prompt variant shot `position` sends."""
        variants = ORDERS[self.order]
        return variants[(position - 1) % len(variants)]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _label(value: float) -> str:
    return f"{value:g}".replace(".", "p")


def _series_kinds(protocol: dict[str, Any]) -> list[tuple[str, float, float, int]]:
    """(protocol, rest_s, precondition_s, series length) for every series shape in config."""
    kinds = []
    if protocol["cold_processes"] > 0:
        kinds.append(("cold", 0.0, 0.0, protocol["cold_processes"]))
    if protocol["warm_shots"] > 0:
        for rest_s, pre_s in itertools.product(protocol["rests_s"], protocol["precondition_s"]):
            kinds.append(("warm", float(rest_s), float(pre_s), protocol["warm_shots"]))
    return kinds


def _job_id(engine, model, length, series_kind, context, order, warmup, load, repeat) -> str:
    name, rest_s, pre_s, _ = series_kind
    shape = "cold" if name == "cold" else f"warm-rest{_label(rest_s)}s-pre{_label(pre_s)}s"
    extra = _warmup_part(warmup) + _load_part(*load)
    return f"{engine}.{model}.p{length}.{shape}.ctx{context}.{order}{extra}.rep{repeat}"


def _warmup_part(warmup: str) -> str:
    # Ids of the default warm-up stay as they were: runs before the axis existed resume.
    return "" if warmup == DEFAULT_WARMUP else f".warmup-{warmup}"


def _load_part(chunk: int, streams: int) -> str:
    """The id part of the prefill chunk and stream count: empty at their defaults, so ids of runs
    from before these axes existed stay as they were and those runs resume."""
    part = "" if chunk == DEFAULT_PREFILL_CHUNK else f".ub{chunk}"
    return part + ("" if streams == ONE_STREAM else f".np{streams}")


def expand_jobs(config: dict[str, Any]) -> list[Job]:
    """The full product of the axes, in a stable order (config order on every axis)."""
    protocol = config["protocol"]
    axes = itertools.product(
        config["engines"],
        protocol_models(config),
        config["prompts"]["lengths"],
        _series_kinds(protocol),
        protocol["context_tokens"],
        protocol["orders"],
        protocol["engine_warmup"],
        protocol["prefill_chunk_tokens"],
        protocol["parallel_streams"],
        range(1, protocol["repeats"] + 1),
    )
    jobs = []
    for engine, model, length, kind, context, order, warmup, chunk, streams, repeat in axes:
        job_id = _job_id(engine, model, length, kind, context, order, warmup, (chunk, streams), repeat)
        name, rest_s, pre_s, n = kind
        jobs.append(Job(job_id, engine, model, length, name, rest_s, context, order, pre_s, repeat, n,
                        engine_warmup=warmup, prefill_chunk=chunk, streams=streams))  # fmt: skip
    return jobs


def measured_models(config: dict[str, Any]) -> list[str]:
    """Models in the grid (a donor-only model has measure: false)."""
    return [name for name, spec in config["models"].items() if spec["measure"]]


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
    from whichshot.prepare.workload_prompts import workload_keys
    from whichshot.prepare.workloads import DOCUMENT_WORKLOADS

    workloads = config["workloads"]
    context = workloads["context_tokens"]

    def job(engine, model, key, mode, shape, warmup, repeat) -> Job:
        workload, kind = key
        length = workloads["document_tokens"] if workload in DOCUMENT_WORKLOADS else None
        job_id = _request_job_id(engine, model, f"{workload}-{kind}", shape, context, mode, warmup, repeat)
        return Job(job_id, engine, model, length, shape[0], shape[1], context, "same", shape[2], repeat,
                   shape[3], workload, kind, mode, warmup)  # fmt: skip

    keys = workload_keys(workloads["names"], workloads["text_kinds"])
    return _request_jobs(config, workload_models(config), keys, job)


def trace_models(config: dict[str, Any], name: str) -> list[str]:
    """Models that run trace `name`."""
    return config["traces"][name]["models"] or measured_models(config)


def expand_trace_jobs(config: dict[str, Any]) -> list[Job]:
    """engines x models x trace requests x speculative modes x {cold; warm} x repeats: each request
    is a cell of its own, run as the workloads are (their series lengths, one rest)."""
    from whichshot.prepare.traces import load_traces

    jobs = []
    for name, trace in load_traces(config).items():
        context = config["traces"][name]["context_tokens"]

        def job(engine, model, request, mode, shape, warmup, repeat, name=name, context=context) -> Job:
            part = f"trace-{name}-{request.request_id}"
            job_id = _request_job_id(engine, model, part, shape, context, mode, warmup, repeat)
            return Job(job_id, engine, model, None, shape[0], shape[1], context, "same", shape[2], repeat,
                       shape[3], TRACE_WORKLOAD, request.text_kind, mode, warmup, name,
                       request.request_id)  # fmt: skip

        jobs += _request_jobs(config, trace_models(config, name), trace.requests, job)
    return jobs


def _request_jobs(config: dict[str, Any], models: list[str], items, make) -> list[Job]:
    """engines x models x items (workloads, trace requests) x every mode that applies to the engine x
    {cold; warm at the first rest} x repeats, with the workloads' series lengths."""
    protocol = {**config["protocol"], **_workload_protocol(config["workloads"])}
    shapes = _series_kinds({**protocol, "rests_s": protocol["rests_s"][:1], "precondition_s": [0]})
    modes = config["spec_modes"]
    axes = itertools.product(config["engines"], models, items, modes, shapes, protocol["engine_warmup"],
                             range(1, protocol["repeats"] + 1))  # fmt: skip
    # A mode without settings for an engine's kind is skipped there, never run as no drafting.
    return [make(*combination) for combination in axes
            if applies(modes[combination[3]], config["engines"][combination[0]]["kind"])]  # fmt: skip


def _request_job_id(engine, model, part, shape, context, mode, warmup, repeat) -> str:
    kind, rest_s = shape[0], shape[1]
    label = "cold" if kind == "cold" else f"warm-rest{_label(rest_s)}s"
    return f"{engine}.{model}.{part}.{label}.ctx{context}.{mode}{_warmup_part(warmup)}.rep{repeat}"


def all_jobs(config: dict[str, Any]) -> list[Job]:
    """Every series of the run: the protocol grid, the workloads and the traces (on each compared
    node where the run compares nodes)."""
    jobs = expand_jobs(config) + expand_workload_jobs(config) + expand_trace_jobs(config)
    placement = config.get("placement", {})
    return on_nodes(jobs, placement["nodes"]) if placement.get("compare_nodes") else jobs


def on_nodes(jobs: list[Job], nodes: list[str]) -> list[Job]:
    """Every series once per node, the node an axis: `<cell>.on-<node>.rep<k>`."""
    return [
        replace(job, node=node, job_id=f"{job.series_label}.on-{node}.rep{job.repeat}")
        for job in jobs
        for node in nodes
    ]


def _workload_protocol(workloads: dict[str, Any]) -> dict[str, Any]:
    """Workload series lengths where the config sets them apart from the protocol grid's."""
    keys = ("cold_processes", "warm_shots")
    return {key: workloads[key] for key in keys if workloads.get(key) is not None}


def job_by_id(config: dict[str, Any], job_id: str) -> Job:
    """Look a job up by its id (raises KeyError for an id the config does not produce)."""
    for job in all_jobs(config):
        if job.job_id == job_id:
            return job
    raise KeyError(job_id)
