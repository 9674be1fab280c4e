"""Which Slurm job, node and GPUs a shot ran on: read from the job's environment and NVML."""

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pynvml

from whichshot.telemetry.gpus import EVERY_VISIBLE_GPU, NvmlDevice, choose_gpus
from whichshot.telemetry.nvml import list_devices


def slurm_gpus(env: Mapping[str, str]) -> str | None:
    """GPU indices Slurm gave this job step (or the whole job), as Slurm wrote them."""
    return env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS") or None


def job_gpus(env: Mapping[str, str], devices: Sequence[NvmlDevice]) -> list[NvmlDevice]:
    """The GPUs this job computes on, among those this process may open (NVML initialised).

    In a Slurm job given GPUs: those Slurm assigned, matched on the device minor number
    (/dev/nvidiaN, which Slurm's indices follow), all of them or none. Otherwise the GPUs
    CUDA_VISIBLE_DEVICES leaves, picked as telemetry picks them (gpus.choose_gpus): every GPU
    this process may open where it is unset, none where it is empty or names a MIG instance.
    """
    assigned = slurm_gpus(env) if env.get("SLURM_JOB_ID") else None
    if assigned:
        return _by_minor_number(assigned, devices)
    choice = choose_gpus(EVERY_VISIBLE_GPU, env, devices)
    return [device for uuid in choice.uuids for device in devices if device.uuid == uuid]


def _by_minor_number(indices: str, devices: Sequence[NvmlDevice]) -> list[NvmlDevice]:
    by_minor = {}
    for device in devices:
        with contextlib.suppress(pynvml.NVMLError):
            handle = pynvml.nvmlDeviceGetHandleByIndex(device.index)
            by_minor[pynvml.nvmlDeviceGetMinorNumber(handle)] = device
    wanted = _int_list(indices)
    found = [by_minor[minor] for minor in wanted if minor in by_minor]
    return found if wanted and len(found) == len(wanted) else []


def _int_list(indices: str) -> list[int]:
    parts = [part.strip() for part in indices.split(",") if part.strip()]
    return [int(part) for part in parts] if all(part.isdigit() for part in parts) else []


def cluster_identity(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Scheduler fields of a shot row (null outside a Slurm job) and the identity of its GPUs."""
    env = os.environ if env is None else env
    in_job = bool(env.get("SLURM_JOB_ID"))
    return {
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "slurm_node": env.get("SLURMD_NODENAME") if in_job else None,
        "slurm_gpus": slurm_gpus(env) if in_job else None,
        **job_gpu_identity(env),
    }


NO_GPU_IDENTITY = {
    "gpu_uuid": None,
    "gpu_name": None,
    "gpu_driver": None,
    "gpu_power_limit_w": None,
    "gpu_max_sm_clock_mhz": None,
}


def job_gpu_identity(env: Mapping[str, str]) -> dict[str, Any]:
    """gpu_identity of the GPUs the job computes on (job_gpus); all null without NVML."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return dict(NO_GPU_IDENTITY)
    try:
        return gpu_identity(job_gpus(env, list_devices()))
    except pynvml.NVMLError:
        return dict(NO_GPU_IDENTITY)
    finally:
        pynvml.nvmlShutdown()


def gpu_identity(devices: Sequence[NvmlDevice]) -> dict[str, Any]:
    """What makes two nodes' GPUs comparable, read from NVML (initialised) for the given GPUs:
    their UUIDs, model name, driver, enforced power limit (summed over several: what the job's
    GPUs may draw together) and highest SM clock (the lowest of several). All null without GPUs;
    a field NVML cannot read for one of them is null: not measured, never guessed."""
    if not devices:
        return dict(NO_GPU_IDENTITY)
    limits_mw = _each(devices, pynvml.nvmlDeviceGetEnforcedPowerLimit)
    clocks_mhz = _each(devices, lambda handle: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM))
    return {
        "gpu_uuid": ",".join(device.uuid for device in devices),
        "gpu_name": "|".join(sorted({device.name for device in devices})),
        "gpu_driver": _driver_version(),
        "gpu_power_limit_w": sum(limits_mw) / 1000 if limits_mw is not None else None,
        "gpu_max_sm_clock_mhz": float(min(clocks_mhz)) if clocks_mhz is not None else None,
    }


def _each(devices: Sequence[NvmlDevice], read: Callable[[Any], int]) -> list[int] | None:
    """read(handle) of every device, or None where NVML fails on any of them."""
    try:
        return [read(pynvml.nvmlDeviceGetHandleByIndex(device.index)) for device in devices]
    except pynvml.NVMLError:
        return None


def _driver_version() -> str | None:
    try:
        version = pynvml.nvmlSystemGetDriverVersion()
    except pynvml.NVMLError:
        return None
    return version.decode() if isinstance(version, bytes) else version
