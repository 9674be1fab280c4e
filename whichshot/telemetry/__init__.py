"""Hardware telemetry sampled during shots: backends, the sampling thread, per-shot summaries.

backends, caveats, gpus = open_backends(["auto"], engine.gpu_use(build))  # gpus: which GPUs, how
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
from whichshot.telemetry.gpus import EVERY_VISIBLE_GPU, GpuChoice, GpuUse
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
    "NO_NVML",
    "Sample",
    "TelemetryRecorder",
    "close_backends",
    "decode_throttle_reasons",
    "open_backends",
    "parse_powermetrics",
    "summarize_shot",
]

Opened = tuple[Backend | None, list[dict[str, str]]]

# "nvml" is the GPU(s) the engine computes on (telemetry/gpus.py); "nvml:N" is NVML's GPU N.
_OPENERS: dict[str, Callable[[], Opened]] = {
    "linux": open_linux,
    "powermetrics": open_powermetrics,
}
NO_NVML = GpuChoice((), "NVML not asked for")


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


def _open_one(name: str, use: GpuUse) -> tuple[Backend | None, list[dict[str, str]], GpuChoice | None]:
    base, _, index = name.partition(":")
    if base == "nvml" and (index.isdigit() or not index):
        return open_nvml(int(index) if index else None, use=use)
    if base not in _OPENERS or index:
        known = ", ".join(["auto", "none", "nvml", "nvml:N", *_OPENERS])
        raise ValueError(f"unknown telemetry backend {name!r}; known: {known}")
    return *_OPENERS[base](), None


def open_backends(
    names: list[str], use: GpuUse = EVERY_VISIBLE_GPU
) -> tuple[list[Backend], list[dict[str, str]], GpuChoice]:
    """Open the named backends ('auto': all that probe OK here; 'none': none), NVML on the GPUs
    the engine uses (use); the caveats, and which GPUs were chosen and how."""
    backends: list[Backend] = []
    caveats: list[dict[str, str]] = []
    gpus = NO_NVML
    for name in _expand(names):
        backend, backend_caveats, choice = _open_one(name, use)
        caveats += backend_caveats
        gpus = choice or gpus
        if backend is not None:
            backends.append(backend)
    return backends, caveats, gpus


def close_backends(backends: list[Backend]) -> None:
    """Close every backend (after the recorder has stopped)."""
    for backend in backends:
        backend.close()
