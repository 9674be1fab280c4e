"""What the fault tests share: the real engine from the cache, a small series to run in-process,
and the process-table check that no engine outlives a test."""

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tests.pipeline import filled_config
from whichshot.cache import cache_root
from whichshot.engine import load_engine
from whichshot.engine.base import Engine, ServerSettings
from whichshot.host import host_identity
from whichshot.measure.grid import Job
from whichshot.measure.protocol import JobContext, ShotTelemetry
from whichshot.prepare.models import fetch_model

SMOKE = filled_config("smoke")
ENGINE, MODEL = "llama_cpp", "smollm2_135m"
# One thread: the faults do not depend on speed, and the CI machine has two cores to share.
THREADS = 1


@dataclass(frozen=True)
class RealEngine:
    """The smoke config's engine build and model, as the pipeline's first stages provide them."""

    engine: Engine
    build: dict[str, Any]
    model_path: Path
    model: dict[str, Any]


@functools.cache
def real_engine() -> RealEngine:
    """The cached llama.cpp build and SmolLM2 model (built and fetched once if not cached)."""
    spec = SMOKE["engines"][ENGINE]
    engine = load_engine(spec["kind"])
    build = engine.build(spec, cache_root(), 2)
    path = fetch_model(MODEL, SMOKE["models"][MODEL], cache_root())
    # The GGUF metadata is left unread (parsing the tokenizer takes seconds): model_file_type is null.
    model = {"sha256": SMOKE["models"][MODEL]["sha256"], "metadata": {"file_type": None}}
    return RealEngine(engine, build, path, model)


def token_ids(count: int, offset: int = 0) -> list[int]:
    """Ordinary vocabulary ids: these faults do not depend on what the prompt says."""
    return [1000 + (offset + 7 * i) % 20000 for i in range(count)]


def prompts(length: int) -> dict[str, Any]:
    """A prompts file with variants A and B of one length (what build_prompts writes)."""
    variants = {f"{length}{v}": {"token_ids": token_ids(length, k)} for k, v in enumerate("AB")}
    return {"corpus": "fixed token ids", "prompts": variants}


def warm_job(shots: int, rest_s: float = 0.0, length: int = 32, context: int = 512) -> Job:
    """One warm series of `shots` consecutive shots in one process."""
    return Job(
        engine=ENGINE,
        model=MODEL,
        prompt_tokens_requested=length,
        protocol="warm",
        rest_s=rest_s,
        context_tokens_requested=context,
        repeat=1,
        series_length=shots,
    )


def job_context(
    tmp_path: Path,
    job: Job,
    engine: Engine | None = None,
    output_tokens: int = 8,
    telemetry: ShotTelemetry | None = None,
    real: RealEngine | None = None,
) -> JobContext:
    """The context run_series.py would build for `job`, on the real engine unless one is given."""
    real = real or real_engine()
    return JobContext(
        job=job,
        engine=engine or real.engine,
        build=real.build,
        model_path=real.model_path,
        model=real.model,
        prompts=prompts(job.prompt_tokens_requested),
        settings=ServerSettings(
            threads=THREADS, context_tokens=job.context_tokens_requested, ready_timeout_s=120
        ),
        output_tokens=output_tokens,
        shot_timeout_s=120,
        log_dir=tmp_path / "logs",
        identity=host_identity(),
        telemetry=telemetry,
    )


def server_settings(context_tokens: int = 512) -> ServerSettings:
    return ServerSettings(threads=THREADS, context_tokens=context_tokens, ready_timeout_s=120)


def child_processes() -> list[psutil.Process]:
    """Every process this test process started that is still running (engines included)."""
    return [p for p in psutil.Process().children(recursive=True) if _running(p)]


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
