"""Each series' plan: what its job measures with, resolved from the config once, as the workflow
loads, and handed to the run_series job as its only params.

Snakemake reruns a job whose params changed, and deletes its outputs first: so a setting reaches a
series' plan only if it changes what that series measures, and re-measures exactly the series whose
plans hold it (docs/protocol.md, "What re-measures what"). What is read only when figures are made
(protocol.warm_fraction, claims, report, run_id) is in no plan; of the bench section a plan holds
only what that series' brackets, verification probe and peer read. The sha256 of the plan's server
settings (SERVER_SETTINGS: every setting its engine is started and asked with; not its port and
timeouts, which change no finished shot and come from the config's server section) is recorded in every
shot, and a journal resumes only shots of the same settings (measure.protocol.resume_mismatch), so a
setting added to the engine or server sections is in the resume identity without being named.

What the config cannot say comes from the job's inputs (SeriesInputs), made by earlier jobs: the
engine's build, the model and draft model files (path, sha256) and the series' own prompts, a file
named by its content (prepare.series_prompts)."""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whichshot.engine import load_engine
from whichshot.engine.settings import server_settings
from whichshot.errors import WhichshotError
from whichshot.hashing import canonical_json, sha256_text
from whichshot.keyed import keyed_engine
from whichshot.measure.bench import later_repeat_because, not_comparable_because
from whichshot.measure.grid import Job
from whichshot.measure.protocol import JobContext
from whichshot.measure.verify_cost import not_probed_because
from whichshot.prepare.series_prompts import GRID, TRACE_REQUEST, WORKLOAD
from whichshot.shots.axes import BASE_WORKLOAD
from whichshot.spec_modes import kind_settings, uses_draft_model
from whichshot.tables import record_schema

ENGINE_LOGS = Path("logs/engines")  # a series' engine logs: ENGINE_LOGS / job_id / process<n>.log
# The server section's defaults (port 0, the timeouts): a context made without the config's own.
_SERVER_SCHEMA = record_schema("config")["properties"]["server"]["properties"]
SERVER_DEFAULTS = {key: value["default"] for key, value in _SERVER_SCHEMA.items()}


def series_plan(config: dict[str, Any], job: Job) -> dict[str, Any]:
    """The series' plan, as canonical JSON values (sorted keys: reordering the config's keys
    changes no plan)."""
    engine = config["engines"][job.engine]
    mode = mode_plan(config, job, engine["kind"])
    plan = {
        "job": job.as_dict(),
        # Its argv and settings (build, threads, gpu_layers, an attached URL ...), each secret as its
        # keyed digest: the plan is a rule param, stored in .snakemake/metadata (whichshot.keyed).
        "engine": keyed_engine(engine),
        "spec_mode": mode,
        "output_tokens": output_budget(config, job),
        "telemetry": config["telemetry"],
        "bench": bench_settings(job, config["bench"], load_engine(engine["kind"]).has_bench),
        "log_dir": str(ENGINE_LOGS / job.job_id),
        # How many of its processes that ran beside other work the series replaces (measure.busy).
        "replace_busy": config["protocol"]["replace_busy"],
    }
    return json.loads(canonical_json(plan))


def mode_plan(config: dict[str, Any], job: Job, kind: str) -> dict[str, Any]:
    """The speculative mode as this engine kind runs it: its settings for the kind (a block for
    another kind is not this series' concern) and the draft model it drafts with, by name."""
    mode = config["spec_modes"].get(job.spec_mode, {})
    settings = kind_settings(mode, kind)
    if settings is None:  # the grid makes no such job; a hand-made one must not run undrafted
        raise ValueError(f"spec mode {job.spec_mode!r} has no settings for engine kind {kind!r}")
    draft = mode.get("draft_model") if uses_draft_model(settings, kind) else None
    return {"settings": settings, "draft_model": draft}


def output_budget(config: dict[str, Any], job: Job) -> int | None:
    """The series' output budget where the config sets it: the grid's protocol.output_tokens, a
    workload's workloads.max_output_tokens; None for a trace request (its prompt carries its own)."""
    if job.workload == BASE_WORKLOAD:
        return config["protocol"]["output_tokens"]
    return None if job.trace else config["workloads"]["max_output_tokens"]


def bench_settings(job: Job, bench: dict[str, Any], has_bench: bool) -> dict[str, Any]:
    """Of the bench section, what this series' job reads. measure.bench, verify_cost and peer ask
    first whether their tool applies to the series at all, so a series none applies to reads
    nothing of it, and the repetitions only matter where the tool runs."""
    bracketed = not_comparable_because(job, "llama-bench") is None  # the peer is set against these too
    settings: dict[str, Any] = {}
    drafted = not_probed_because(job) is None  # the verify-cost and verify probes' series
    if bracketed or drafted:
        settings["enabled"] = bench["enabled"]
        if bench["enabled"] and has_bench:
            settings["repeats"] = bench["repeats"]
            if later_repeat_because(job, bench) is None:  # a later repeat runs no tool: no repetitions
                settings["repetitions"] = bench["repetitions"]
    if drafted:
        probe = bench["verify_probe"]
        settings["verify_probe"] = probe if bench["enabled"] and probe["enabled"] else {"enabled": False}
    if bracketed:
        peer = bench["peer_client"]
        settings["peer_client"] = peer if peer["enabled"] else {"enabled": False}
    return settings


# The plan's server settings: what the series' engine is started and asked with. Not its telemetry,
# bench or log path: an interrupted series whose brackets change still resumes its finished shots.
SERVER_SETTINGS = ("job", "engine", "spec_mode", "output_tokens")


def settings_sha256(plan: dict[str, Any]) -> str:
    """The sha256 of the plan's server settings (its engine's secrets as their keyed digests: the
    real values told apart, none recoverable): every shot records it, and a journal resumes only
    shots of it."""
    return sha256_text(canonical_json({key: plan[key] for key in SERVER_SETTINGS}))


class PlanNotOfConfig(WhichshotError):
    """The config a series' job reads is not the one its plan was made from."""


def engine_of_plan(plan: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The series' engine settings as the config gives them, secrets in clear (the plan holds them
    keyed), once they are the plan's."""
    name = plan["job"]["engine"]
    engine = json.loads(canonical_json((config.get("engines") or {}).get(name)))
    if not isinstance(engine, dict) or keyed_engine(engine) != plan["engine"]:
        raise PlanNotOfConfig(
            f"engines.{name} in the config differs from the settings this series was planned with (or "
            "this machine's key in whichshot's cache differs from the planning machine's): run the "
            "workflow again from one config"
        )
    return engine


def prompt_entries(job: Job) -> tuple[str, str]:
    """Which entries of its prompts file the series sends (prepare.series_prompts' section, key)."""
    if job.trace:
        return TRACE_REQUEST, str(job.request_id)
    if job.workload == BASE_WORKLOAD:
        return GRID, str(job.prompt_tokens_requested)
    return WORKLOAD, job.prompt_key


def prompts_path(job: Job) -> Path:
    """The prompts file that holds the series' prompts: its model's, or its model's trace's."""
    source = f"{job.model}.trace-{job.trace}" if job.trace else job.model
    return Path("results") / "prompts" / job.engine / f"{source}.json"


def prompts_needed(jobs: Iterable[Job]) -> dict[Path, list[tuple[str, str]]]:
    """Each prompts file and the entries (section, key) its series send."""
    needed: dict[Path, list[tuple[str, str]]] = {}
    for job in jobs:
        needed.setdefault(prompts_path(job), []).append(prompt_entries(job))
    return needed


@dataclass(frozen=True)
class SeriesInputs:
    """The files a series' job reads, made by earlier jobs: the engine's build.json, the model's
    and (where its mode drafts with one) the draft model's JSON, the series' own prompts."""

    build: Path
    model: Path
    prompts: Path
    draft_model: Path | None = None


def job_context(
    plan: dict[str, Any],
    inputs: SeriesInputs,
    identity: dict[str, Any],
    engine_spec: dict[str, Any] | None = None,
    server: dict[str, Any] | None = None,
) -> JobContext:
    """The series' context: its plan, and what earlier jobs made of the config (identity: where it
    runs, host.host_identity()); engine_spec: its engine's settings in clear (engine_of_plan), else
    the plan's own (right where they hold no secret); server: the config's server section (port and
    timeouts, in no plan: they change no finished shot), else its defaults."""
    job = Job(**plan["job"])
    engine_spec = engine_spec if engine_spec is not None else plan["engine"]
    server = server if server is not None else SERVER_DEFAULTS
    engine = load_engine(engine_spec["kind"])
    model = _read_json(inputs.model)
    draft = _read_json(inputs.draft_model) if inputs.draft_model else None
    mode = plan["spec_mode"]
    spec_args = engine.speculative_args(mode["settings"], Path(draft["path"]) if draft else None)
    settings = server_settings(engine_spec, server, job.context_tokens_requested, tuple(spec_args),
                               job.engine_warmup, job.prefill_chunk_tokens, job.parallel_streams,
                               job.compile_cache)  # fmt: skip
    return JobContext(
        job=job,
        engine=engine,
        build=_read_json(inputs.build),
        model_path=Path(model["path"]),
        model=model,
        prompts=_read_json(inputs.prompts),
        settings=settings,
        output_tokens=plan["output_tokens"],
        shot_timeout_s=server["shot_timeout_s"],
        log_dir=Path(plan["log_dir"]),
        identity=identity,
        spec_params=mode["settings"],
        draft_model=draft,
        settings_sha256=settings_sha256(plan),
        replace_busy=plan["replace_busy"],
    )


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())
