"""Where a shot ran: host, CPU, scheduler job. Recorded next to every number."""

import os
import platform
import socket
from pathlib import Path
from typing import Any

from whichshot.cluster import cluster_identity


def allowed_cores() -> int:
    """Cores this process may run on (its CPU affinity: a Slurm allocation or a cgroup narrows it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (or platform's guess)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def host_identity() -> dict[str, Any]:
    """Identity of the machine and scheduler allocation this process runs in."""
    return {
        "hostname": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpu_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
        **cluster_identity(),
    }
