"""Facts llama-server prints to its log and nowhere else: the KV cache it allocated at start-up,
whether it warmed up before it reported ready and, per request, the mean accepted draft length
(tokens per verification step with a draft).

All are engine-reported. The log is written by a background thread, so a reader waits briefly
for the line it expects; a line that never comes yields None, never a guess.
"""

import re
import time
from pathlib import Path

from whichshot.engine.base import NO_WARMUP, ONE_DECODE

# llama_kv_cache: size =   45.00 MiB (  2048 cells,  30 layers,  1/1 seqs), K (f16): 22.50 MiB, V (f16): ...
# A model with sliding-window layers prints one such line per cache (full and SWA).
_KV_SIZE = re.compile(
    r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers.*?K \((\w+)\).*?V \((\w+)\)"
)
# print_timing: ... draft acceptance = 0.79688 (   51 accepted /    64 generated), mean len =  8.29
# (numbers are padded to a width: one or more spaces after each '=')
_DRAFT = re.compile(
    r"draft acceptance =\s*[\d.]+ \(\s*(\d+) accepted /\s*(\d+) generated\), mean len =\s*([\d.]+)"
)
_WAIT_S = 3.0  # normally the line is there within milliseconds; a loaded machine lags
_KV_SIZE_MARKER = "llama_kv_cache: size"
# cmn  common_init_: warming up the model with an empty run - please wait ... (--no-warmup to disable)
# common/common.cpp prints it, only when it warms up, at the level of the KV cache's size line (trace).
_WARMUP = "warming up the model with an empty run"
# srv  llama_server: model loaded -- printed once the server is ready, after any warm-up.
_MODEL_LOADED = ": model loaded"


class LogReader:
    """Reads an engine log incrementally from where the last read stopped."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset  # bytes before it: an earlier process's lines in the same file

    def read_new(self) -> str:
        with open(self.path, "rb") as log:
            log.seek(self.offset)
            data = log.read()
        self.offset += len(data)
        return data.decode("utf-8", errors="replace")

    def read_until(self, marker: str, timeout_s: float = _WAIT_S) -> str:
        """New text up to and including the first line holding `marker` (waits up to timeout_s)."""
        text = ""
        deadline = time.monotonic() + timeout_s
        while True:
            text += self.read_new()
            if marker in text or time.monotonic() > deadline:
                return text
            time.sleep(0.01)


def startup_log(reader: LogReader) -> str:
    """llama-server's start-up lines up to its KV cache's size and, where they hold that size (a log
    at trace level), on to 'model loaded', printed once it is ready, past any warm-up."""
    text = reader.read_until(_KV_SIZE_MARKER)
    if _KV_SIZE.search(text) and _MODEL_LOADED not in text:
        text += reader.read_until(_MODEL_LOADED)
    return text


def warmup_run(startup: str) -> str | None:
    """The warm-up the start-up log shows: one decode where it printed its warm-up line, none where it
    went past the warm-up's place at that line's level without it, None where it cannot tell (a log
    too terse for the KV cache's size line, or cut short before 'model loaded')."""
    if _WARMUP in startup:
        return ONE_DECODE
    return NO_WARMUP if _KV_SIZE.search(startup) and _MODEL_LOADED in startup else None


def kv_cache_facts(text: str) -> dict[str, float | int | str | None]:
    """KV cache size (MiB, summed over caches), cells and K/V types from the start-up log."""
    found = _KV_SIZE.findall(text)
    if not found:
        return {"kv_cache_mib": None, "kv_cache_cells": None, "kv_cache_type": None}
    types = sorted({f"K {k}/V {v}" for *_, k, v in found})
    return {
        "kv_cache_mib": round(sum(float(size) for size, *_ in found), 3),
        "kv_cache_cells": max(int(cells) for _, cells, *_ in found),
        "kv_cache_type": ", ".join(types),
    }


def draft_mean_length(text: str, accepted: int, drafted: int) -> float | None:
    """llama-server's 'mean len' for one request: tokens emitted per verification step that had a
    draft, the accepted draft tokens plus the target's own token ((accepted + drafts) / drafts).
    Taken only from a line whose accepted and drafted counts are the request's own (the engine's
    draft_n_accepted and draft_n), so an earlier request's line is never read as this one's."""
    found = [mean for a, d, mean in _DRAFT.findall(text) if (int(a), int(d)) == (accepted, drafted)]
    return float(found[-1]) if found else None
