"""Was the machine busy with something else during a shot? CPU time the whole host spent
(psutil.cpu_times: every CPU, user + system + irq...) minus what the engine's process tree and
this measuring process spent, over the shot's wall time: the other work, in cores.

A shared or noisy machine shows up here instead of silently in the speed figures. Readings that
psutil cannot give (a vanished process, no /proc) give None: not measured, never a guess.
"""

import contextlib
import time
from dataclasses import dataclass

import pandas as pd
import psutil

# Other work competes with the engine once it exceeds the cores the engine leaves idle (the host's
# logical cores - the engine's threads - the harness) by more than a noise margin
# (busy_threshold_cores). The harness (client and telemetry) stays under 1 % of one core (DESIGN).
BUSY_HARNESS_CORES = 0.01
# Idle 2-core reference runs whose engine took both cores read 0.019-0.056 cores median, at most
# 0.09 at the 90th percentile (results/reference/cpu_*) and 0.051 at most in the cleanest (cpu_first_run).
BUSY_MARGIN_CORES = 0.1
# Shots that record no core count or engine threads (older rows) keep the old fixed threshold.
BUSY_CORES = 0.25


def busy_threshold_cores(cpu_count: float | None, threads: float | None) -> float:
    """Average cores of other work during a shot above which it competed with the engine: the idle
    cores the engine leaves plus the noise margin; the fixed BUSY_CORES where either is not recorded."""
    if cpu_count is None or threads is None or pd.isna(cpu_count) or pd.isna(threads):
        return BUSY_CORES
    return max(0.0, float(cpu_count) - float(threads) - BUSY_HARNESS_CORES) + BUSY_MARGIN_CORES


@dataclass
class _Snapshot:
    t_s: float
    host_busy_s: float
    engine_s: float
    harness_s: float


def _busy_seconds() -> float:
    times = psutil.cpu_times()
    idle = times.idle + getattr(times, "iowait", 0.0)
    return sum(times) - idle - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)


def _process_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _tree_seconds(root: psutil.Process) -> float:
    """CPU seconds of a process and every descendant (live ones, and those it has reaped)."""
    times = root.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in root.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += _process_seconds(child)
    return total


class HostLoad:
    """Brackets one shot: start() before the request, stop() after it."""

    def __init__(self, engine_pid: int | None) -> None:
        self._engine_pid = engine_pid
        self._engine: psutil.Process | None = None  # set by start()
        self._harness: psutil.Process | None = None
        self._start: _Snapshot | None = None

    def _snapshot(self) -> _Snapshot:
        return _Snapshot(time.monotonic(), _busy_seconds(), _tree_seconds(self._engine),
                         _process_seconds(self._harness))  # fmt: skip

    def start(self) -> None:
        if self._engine_pid is None:  # a server whichshot did not start: its CPU time is not ours to see
            self._start = None
            return
        try:
            self._engine, self._harness = psutil.Process(self._engine_pid), psutil.Process()
            self._start = self._snapshot()
        except (psutil.Error, OSError):
            self._start = None

    def stop(self) -> dict[str, float | None]:
        """host_foreign_cpu_s (CPU seconds of other work) and host_foreign_cores (their average)."""
        if self._start is None:
            return not_measured()
        try:
            end = self._snapshot()
        except (psutil.Error, OSError):
            return not_measured()
        begin = self._start
        foreign = (end.host_busy_s - begin.host_busy_s) - (end.engine_s - begin.engine_s)
        foreign = max(0.0, foreign - (end.harness_s - begin.harness_s))  # clock ticks can undercount
        wall = end.t_s - begin.t_s
        return {"host_foreign_cpu_s": foreign, "host_foreign_cores": foreign / wall if wall > 0 else None}


def not_measured() -> dict[str, None]:
    return {"host_foreign_cpu_s": None, "host_foreign_cores": None}
