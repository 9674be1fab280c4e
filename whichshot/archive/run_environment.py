"""What the machine that ran the pipeline was: OS, CPU, memory, GPU, driver, power limit, Python
packages and the environment variables that steer the engines. A value that cannot be read says
"not measured" (with the reason), never a guess."""

import datetime as dt
import importlib.metadata
import os
import platform
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psutil
import pynvml

from whichshot.host import cpu_model
from whichshot.redact import redact_environment

NOT_MEASURED = "not measured"
# Variables that change how an engine, a BLAS or the scheduler behaves; the rest are left out.
RELEVANT_PREFIXES = (
    "CUDA_", "NVIDIA_", "GGML_", "LLAMA_", "OMP_", "MKL_", "OPENBLAS_", "HIP_", "ROCR_",
    "SLURM_", "WHICHSHOT_", "PYTHONHASHSEED", "LD_LIBRARY_PATH", "PATH", "LANG", "LC_", "TZ",
)  # fmt: skip


def capture_environment(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The environment record written into the archive."""
    return {
        "captured_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "captured_where": "the machine and process that wrote the archive (the end of the run)",
        "os": _os(),
        "cpu": _cpu(),
        "memory_total_bytes": psutil.virtual_memory().total,
        "gpus": gpu_identity(),
        "python": {"version": sys.version, "implementation": platform.python_implementation()},
        "python_packages": python_packages(),
        "environment_variables": relevant_variables(os.environ if env is None else env),
    }


def _os() -> dict[str, str]:
    uname = platform.uname()
    return {"system": uname.system, "release": uname.release, "version": uname.version,
            "machine": uname.machine, "platform": platform.platform()}  # fmt: skip


def _cpu() -> dict[str, Any]:
    governor = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    return {
        "model": cpu_model() or NOT_MEASURED,
        "logical_cpus": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else NOT_MEASURED,
        "scaling_governor": governor.read_text().strip() if governor.exists() else NOT_MEASURED,
    }


def python_packages() -> dict[str, str]:
    """Every installed distribution and its version (importlib.metadata)."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found[name] = dist.version
    return dict(sorted(found.items(), key=lambda item: item[0].lower()))


def relevant_variables(env: Mapping[str, str]) -> dict[str, str]:
    """Engine-relevant variables, with every one that may hold a secret dropped."""
    chosen = {k: v for k, v in env.items() if k.startswith(RELEVANT_PREFIXES)}
    return dict(sorted(redact_environment(chosen).items()))


def gpu_identity() -> dict[str, Any]:
    """Driver, CUDA driver version and per-GPU name, UUID, memory and power limits via NVML."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"not_measured": f"no NVIDIA driver (NVML init failed: {exc})", "devices": []}
    try:
        count = pynvml.nvmlDeviceGetCount()
        return {
            "driver_version": _read(pynvml.nvmlSystemGetDriverVersion),
            "cuda_driver_version": _read(pynvml.nvmlSystemGetCudaDriverVersion_v2),
            "devices": [_device(pynvml.nvmlDeviceGetHandleByIndex(i), i) for i in range(count)],
        }
    finally:
        pynvml.nvmlShutdown()


def _device(handle: Any, index: int) -> dict[str, Any]:
    return {
        "index": index,
        "name": _read(pynvml.nvmlDeviceGetName, handle),
        "uuid": _read(pynvml.nvmlDeviceGetUUID, handle),
        "memory_total_mib": _read(lambda h: pynvml.nvmlDeviceGetMemoryInfo(h).total / 2**20, handle),
        # Read back from the driver: the limit in force, not what anyone asked for.
        "power_limit_enforced_w": _read(lambda h: pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000, handle),
        "power_limit_default_w": _read(
            lambda h: pynvml.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000, handle
        ),
        "sm_clock_max_mhz": _read(
            lambda h: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM), handle
        ),
        "persistence_mode": _read(pynvml.nvmlDeviceGetPersistenceMode, handle),
    }


def _read(read: Callable[..., Any], *args: Any) -> Any:
    try:
        value = read(*args)
    except pynvml.NVMLError as exc:
        return f"{NOT_MEASURED} ({exc})"
    return value.decode() if isinstance(value, bytes) else value
