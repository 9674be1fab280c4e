"""Which Slurm job, node and GPU a shot ran on: read from the job's environment and NVML."""

import os
from collections.abc import Mapping
from typing import Any

import pynvml


def slurm_gpus(env: Mapping[str, str]) -> str | None:
    """GPU indices Slurm gave this job step (or the whole job), as Slurm wrote them."""
    return env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS") or None


def gpu_uuids(indices: str | None) -> str | None:
    """NVML UUIDs of the GPUs whose device minor number (/dev/nvidiaN) Slurm assigned.

    Slurm's GPU indices follow the gres device files, so they are matched on the minor number,
    not on NVML's enumeration order. None when nothing was assigned or NVML cannot be read.
    """
    wanted = _int_list(indices)
    if not wanted:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        found = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            found[pynvml.nvmlDeviceGetMinorNumber(handle)] = _text(pynvml.nvmlDeviceGetUUID(handle))
    except pynvml.NVMLError:
        return None
    finally:
        pynvml.nvmlShutdown()
    uuids = [found[minor] for minor in wanted if minor in found]
    return ",".join(uuids) if len(uuids) == len(wanted) else None


def _int_list(indices: str | None) -> list[int]:
    parts = [part.strip() for part in (indices or "").split(",") if part.strip()]
    return [int(part) for part in parts] if all(part.isdigit() for part in parts) else []


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def cluster_identity(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Scheduler fields of a shot row (null outside a Slurm job) and the identity of its GPUs."""
    env = os.environ if env is None else env
    gpus = slurm_gpus(env) if env.get("SLURM_JOB_ID") else None
    uuids = gpu_uuids(gpus)
    return {
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "slurm_node": env.get("SLURMD_NODENAME") if env.get("SLURM_JOB_ID") else None,
        "slurm_gpus": gpus,
        "gpu_uuid": uuids,
        **gpu_identity(uuids.split(",") if uuids else None),
    }


NO_GPU_IDENTITY = {
    "gpu_name": None,
    "gpu_driver": None,
    "gpu_power_limit_w": None,
    "gpu_max_sm_clock_mhz": None,
}


def gpu_identity(uuids: list[str] | None) -> dict[str, Any]:
    """What makes two nodes' GPUs comparable: model name, driver, enforced power limit and highest
    SM clock, read from NVML for the given GPUs (every GPU NVML sees where None). All null
    without NVML or GPUs: not measured, never guessed."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return dict(NO_GPU_IDENTITY)
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        if uuids is not None:
            handles = [h for h in handles if _text(pynvml.nvmlDeviceGetUUID(h)) in uuids]
        if not handles:
            return dict(NO_GPU_IDENTITY)
        names = sorted({_text(pynvml.nvmlDeviceGetName(h)) for h in handles})
        limits_mw = [pynvml.nvmlDeviceGetEnforcedPowerLimit(h) for h in handles]
        clocks = [pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM) for h in handles]
        return {
            "gpu_name": "|".join(names),
            "gpu_driver": _text(pynvml.nvmlSystemGetDriverVersion()),
            "gpu_power_limit_w": sum(limits_mw) / 1000,
            "gpu_max_sm_clock_mhz": float(min(clocks)),
        }
    except pynvml.NVMLError:
        return dict(NO_GPU_IDENTITY)
    finally:
        pynvml.nvmlShutdown()
