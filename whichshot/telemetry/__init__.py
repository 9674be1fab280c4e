"""Hardware telemetry sampled during shots: backends, the sampling thread, per-shot summaries.

backends, caveats = open_backends(["auto"])
recorder = TelemetryRecorder(backends, interval_s=0.25, sink=write_row)
recorder.start()
recorder.mark(); t_start_s = time.monotonic()   # per shot: mark() brackets the energy
...                                              # the shot
t_end_s = time.monotonic(); recorder.mark()
summary = summarize_shot(recorder.samples_around(t_start_s, t_end_s), t_start_s, t_end_s, n)
recorder.stop(); close_backends(backends)
"""

import sys
from collections.abc import Callable

from whichshot.telemetry.base import (
    LINUX_COLUMNS,
    MAC_COLUMNS,
    NVML_COLUMNS,
    SAMPLE_COLUMNS,
    Backend,
    Reading,
    Sample,
)
from whichshot.telemetry.linux import open_linux
from whichshot.telemetry.nvml import THERMAL_REASONS, decode_throttle_reasons, open_nvml
from whichshot.telemetry.powermetrics import open_powermetrics, parse_powermetrics
from whichshot.telemetry.recorder import TelemetryRecorder
from whichshot.telemetry.summary import SUMMARY_COLUMNS, summarize_shot

__all__ = [
    "LINUX_COLUMNS",
    "MAC_COLUMNS",
    "NVML_COLUMNS",
    "SAMPLE_COLUMNS",
    "SUMMARY_COLUMNS",
    "THERMAL_REASONS",
    "Backend",
    "Reading",
    "Sample",
    "TelemetryRecorder",
    "close_backends",
    "decode_throttle_reasons",
    "open_backends",
    "parse_powermetrics",
    "summarize_shot",
]

Opened = tuple[Backend | None, list[dict[str, str]]]

# "nvml" is GPU 0 in NVML order; "nvml:N" picks GPU N (NVML order is PCI bus order, which
# CUDA_VISIBLE_DEVICES numbering need not follow).
_OPENERS: dict[str, Callable[[], Opened]] = {
    "nvml": open_nvml,
    "linux": open_linux,
    "powermetrics": open_powermetrics,
}


def _auto_names() -> list[str]:
    """Backends worth probing on this platform: 'auto' asks for no others."""
    return ["powermetrics"] if sys.platform == "darwin" else ["nvml", "linux"]


def _expand(names: list[str]) -> list[str]:
    """Config names with 'auto' expanded, 'none' dropped, duplicates removed, order kept."""
    expanded: list[str] = []
    for name in names:
        for one in _auto_names() if name == "auto" else [] if name == "none" else [name]:
            if one not in expanded:
                expanded.append(one)
    return expanded


def _open_one(name: str) -> Opened:
    base, _, index = name.partition(":")
    if base == "nvml" and index.isdigit():
        return open_nvml(int(index))
    if base not in _OPENERS or index:
        known = ", ".join(["auto", "none", *_OPENERS, "nvml:N"])
        raise ValueError(f"unknown telemetry backend {name!r}; known: {known}")
    return _OPENERS[base]()


def open_backends(names: list[str]) -> tuple[list[Backend], list[dict[str, str]]]:
    """Open the named backends ('auto': all that probe OK here; 'none': none) and the caveats."""
    backends: list[Backend] = []
    caveats: list[dict[str, str]] = []
    for name in _expand(names):
        backend, backend_caveats = _open_one(name)
        caveats += backend_caveats
        if backend is not None:
            backends.append(backend)
    return backends, caveats


def close_backends(backends: list[Backend]) -> None:
    """Close every backend (after the recorder has stopped)."""
    for backend in backends:
        backend.close()
