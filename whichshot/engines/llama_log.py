"""Facts llama-server prints to its log and nowhere else: the KV cache it allocated at start-up
and, per request, the mean accepted draft length (tokens per verification step with a draft).

Both are engine-reported. The log is written by a background thread, so a reader waits briefly
for the line it expects; a line that never comes yields None, never a guess.
"""

import re
import time
from pathlib import Path

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


class LogReader:
    """Reads an engine log incrementally from where the last read stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

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
