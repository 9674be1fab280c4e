"""The compute peak of the engine's own kernels at a model's quantisation (issue 33): the engine's
benchmark tool (llama-bench) prefilling a synthetic model whose every matrix has one ggml type, with
the engine's threads and GPU layers. A float32 GEMM is not what a quantised model runs: on a Xeon
the Q6_K kernels outran numpy's float32 GEMM twofold while the Q5_0 ones ran at half its speed.

One probe per engine and ggml type among the prefill matrices of the models it runs. Its work per
prompt token is counted by the rules model_traffic applies to a real model (2 x the parameters a
prompt token multiplies, plus attention over half the prompt at depth 0), so the peak and the
ceiling it divides count FLOPs the same way. Each record cites its argv, build id, host, time and
every repetition; a probe that cannot run says why ("not_measured"), with no value.
"""

import socket
import time
from functools import partial
from pathlib import Path
from typing import Any

from whichshot.cache import derived_from_file, exclusive_lock
from whichshot.engine import load_engine
from whichshot.engine.base import ServerSettings
from whichshot.errors import WhichshotError
from whichshot.hashing import short_id
from whichshot.measure.bench import run_bench
from whichshot.prepare.model_traffic import model_traffic
from whichshot.prepare.synthetic import write_kernel_model

# Matrices as large as a 1-2B model's, so that the kernel, not the graph around it, sets the pace;
# two layers (the last one's FFN runs for the logits' token only: model_traffic's rules).
KERNEL_SHAPE = {"hidden": 2048, "ffn": 8192, "heads": 16, "kv_heads": 16, "layers": 2}
PROMPT_TOKENS = 512
REPETITIONS = 3
CONTEXT_TOKENS = 2 * PROMPT_TOKENS
# A shared machine's speed drifts over minutes: the kernels are timed before the grid (with the
# hardware probe) and again after it, and the ceiling takes the faster of the two.
BEFORE, AFTER = "before the grid", "after the grid"


def kernel_model(cache: Path, weight_type: str) -> Path:
    """The synthetic model of one ggml type (written once into the cache)."""
    name = f"{weight_type}-{short_id(KERNEL_SHAPE)}.gguf"
    path = cache / "derived" / "kernel_models" / name
    with exclusive_lock(path.with_name(name + ".lock")):
        if not path.is_file():
            write_kernel_model(path, weight_type, KERNEL_SHAPE)
    return path


def probe_engine_kernel(
    engine: str, spec: dict[str, Any], build: dict[str, Any], weight_type: str, cache: Path
) -> dict[str, Any]:
    """One engine's kernels of one ggml type: llama-bench pp at depth 0 on the kernel model."""
    record = {"engine": engine, "weight_type": weight_type, "build_id": build.get("build_id"),
              "hostname": socket.gethostname(), "measured_at_unix_s": time.time()}  # fmt: skip
    runner = load_engine(spec["kind"])
    if not runner.has_bench:
        return {**record, "not_measured": "the engine kind has no benchmark tool"}
    try:
        path = kernel_model(cache, weight_type)
    except (KeyError, ValueError) as exc:  # a type gguf cannot write as whole blocks of this shape
        return {**record, "not_measured": f"no kernel model of {weight_type}: {exc}"}
    settings = ServerSettings(spec.get("threads", 1), CONTEXT_TOKENS, gpu_layers=spec.get("gpu_layers", 0))
    on_gpu = build.get("identity", {}).get("backend") == "cuda" and settings.gpu_layers > 0
    argv = [*runner.bench_argv(build, path, settings), "-p", str(PROMPT_TOKENS), "-n", "0", "-d", "0",
            "-r", str(REPETITIONS), "-o", "json"]  # fmt: skip
    return {**record, **_bench(argv), "argv": argv, "device": "gpu" if on_gpu else "cpu",
            "threads": settings.threads, "gpu_layers": settings.gpu_layers, **_work(path)}  # fmt: skip


def _bench(argv: list[str]) -> dict[str, Any]:
    rows, error = run_bench(argv, expected_rows=1)
    if error:
        return {"not_measured": error}
    (row,) = rows
    samples = [PROMPT_TOKENS / tok_s for tok_s in row["samples_tok_s"] if tok_s > 0]
    if not samples:
        return {"not_measured": "llama-bench gave no repetition"}
    return {"not_measured": None, "samples_tok_s": row["samples_tok_s"], "samples_s": samples,
            "build_commit": row["build_commit"], "n_threads": row["n_threads"]}  # fmt: skip


def _work(path: Path) -> dict[str, Any]:
    """FLOPs of one run (PROMPT_TOKENS from an empty context), by model_traffic's rules."""
    traffic = model_traffic(path)
    per_token = 2 * traffic["prefill_parameters_per_token"]
    per_token += traffic["attention_flops_per_context_token"] * PROMPT_TOKENS / 2
    return {
        "kernel_model": {
            "file": path.name,
            "shape": KERNEL_SHAPE,
            **{k: traffic[k] for k in ("prefill_parameters_per_token", "attention_flops_per_context_token")},
        },  # fmt: skip
        "prompt_tokens": PROMPT_TOKENS,
        "depth_tokens": 0,
        "flops_per_run": per_token * PROMPT_TOKENS,
        "method": f"llama-bench pp{PROMPT_TOKENS} at depth 0 on a synthetic llama model ({_shape_words()}, "
        "every matrix this type, constant blocks); FLOPs = prompt tokens x (2 x parameters per prompt "
        "token + attention FLOPs per context token x prompt / 2), per run over the run's seconds",
    }


def _shape_words() -> str:
    return f"{KERNEL_SHAPE['hidden']} hidden, {KERNEL_SHAPE['ffn']} ffn, {KERNEL_SHAPE['layers']} layers"


def probe_engine_kernels(
    wanted: dict[str, list[str]],
    specs: dict[str, dict[str, Any]],
    builds: dict[str, dict[str, Any]],
    cache: Path,
    bracket: str = BEFORE,
) -> list[dict[str, Any]]:
    """Every (engine, ggml type) in `wanted` (engine -> types), in order; `bracket` says whether
    this pass ran before the measured grid or after it."""
    return [
        {**probe_engine_kernel(engine, specs[engine], builds[engine], weight_type, cache), "bracket": bracket}
        for engine, types in sorted(wanted.items())
        for weight_type in sorted(types)
    ]


def wanted_types(
    runs: dict[str, list[str]], models: dict[str, dict[str, Any]], cache: Path
) -> dict[str, list[str]]:
    """Engine -> the ggml types of the prefill matrices of the models it runs (`runs`: engine ->
    model names; `models`: name -> the fetched model's record)."""
    return {
        engine: sorted({t for model in names for t in _matrix_types(cache, models[model])})
        for engine, names in runs.items()
    }


def _matrix_types(cache: Path, model: dict[str, Any]) -> list[str]:
    """The ggml types of a model's prefill matrices (none where its per-token costs are unreadable)."""
    read = partial(model_traffic, Path(model["path"]))
    try:
        costs = derived_from_file(cache, "model_traffic", model["sha256"], read)
    except WhichshotError:
        return []
    return list(costs["prefill_matrix_parameters_by_type"])


def merge_after(probe: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """A hardware probe with the kernel records of the pass after the grid on the same machine
    added to its own (the ceiling takes the fastest of both)."""
    return {**probe, "engine_kernels": [*probe.get("engine_kernels", []), *after.get("engine_kernels", [])]}
