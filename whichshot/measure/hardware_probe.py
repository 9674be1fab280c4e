"""Peak bandwidth and compute of the machine the shots ran on: measured where we can, from a cited
table where we cannot.

CPU (measured, by us): the best of several copies of a buffer far larger than the caches, split
across as many threads as the engines use (one core alone cannot draw the memory's bandwidth; numpy
releases the GIL while it copies), counted as bytes read plus bytes written per second, and the
same copy on one thread; and the best of several float32 matrix products (numpy's BLAS, every core),
counted as 2 n^3 FLOPs per second. The GEMM is not the quantised kernel an engine runs: the engine's
own kernels are timed by measure/kernel_probe.py, and the ceilings prefer those.
GPU: the vendor's peak for the NVML device name, from schemas/hardware_peaks.yaml (assumed), and,
where PyTorch with CUDA is installed, our own probe of the first visible GPU (measured): the best
of several device-to-device copies (bytes read plus written per second) and bf16 matrix products
(2 n^3 FLOPs per second), each timed with CUDA events after a warm-up.
"""

import time
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
import yaml

from whichshot.host import host_identity
from whichshot.telemetry.nvml import list_devices

COPY_BYTES = 256 * 1024 * 1024
COPY_REPEATS = 5
GEMM_N = 1024
GEMM_REPEATS = 5


def probe_cpu(threads: int = 1) -> dict[str, Any]:
    """This CPU's copy bandwidth on `threads` threads (the engines') and on one, and its float32
    GEMM throughput (the best repetition of each)."""
    source = np.ones(COPY_BYTES // 8, dtype=np.float64)
    target = np.empty_like(source)
    one_thread = [_timed(lambda: np.copyto(target, source)) for _ in range(COPY_REPEATS)]
    copies = threaded_copies(target, source, threads)
    a = np.random.default_rng(0).standard_normal((GEMM_N, GEMM_N), dtype=np.float32)
    products = [_timed(lambda: a @ a) for _ in range(GEMM_REPEATS)]
    return {
        "copy_bandwidth_bytes_s": 2 * COPY_BYTES / min(copies),
        "copy_samples_s": copies,
        "copy_threads": threads,
        "copy_method": f"numpy copyto of {COPY_BYTES} bytes split across {threads} thread(s), best of "
        f"{COPY_REPEATS}: (read + write) / time",
        "copy_one_thread_bandwidth_bytes_s": 2 * COPY_BYTES / min(one_thread),
        "copy_one_thread_samples_s": one_thread,
        "copy_one_thread_method": f"numpy copyto of {COPY_BYTES} bytes on one thread, best of "
        f"{COPY_REPEATS}: (read + write) / time",
        "gemm_flop_s": 2 * GEMM_N**3 / min(products),
        "gemm_samples_s": products,
        "gemm_method": f"numpy float32 {GEMM_N}x{GEMM_N} matmul, best of {GEMM_REPEATS}: 2 n^3 / time",
    }


def threaded_copies(target: np.ndarray, source: np.ndarray, threads: int) -> list[float]:
    """Seconds of each of COPY_REPEATS copies of `source` into `target`, each thread copying its own
    contiguous slice; the threads start before the clock does."""
    parts = list(zip(np.array_split(target, threads), np.array_split(source, threads), strict=True))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(lambda _: None, range(threads)))  # every worker started, off the clock
        copy = lambda: list(pool.map(lambda part: np.copyto(*part), parts))  # noqa: E731
        return [_timed(copy) for _ in range(COPY_REPEATS)]


def _timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


@cache
def peak_table() -> tuple[dict[str, Any], ...]:
    text = resources.files("whichshot").joinpath("schemas", "hardware_peaks.yaml").read_text()
    return tuple(yaml.safe_load(text))


def gpu_peaks(device_name: str) -> dict[str, Any] | None:
    """The table's entry for an NVML device name (None: not in the table, no ceiling)."""
    return next((entry for entry in peak_table() if entry["match"] in device_name), None)


def visible_gpus() -> list[dict[str, Any]]:
    """uuid and name of every GPU NVML sees here (none without NVML)."""
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # no driver: no GPU to name
        return []
    try:
        return [{"uuid": device.uuid, "name": device.name} for device in list_devices()]
    finally:
        pynvml.nvmlShutdown()


GPU_COPY_BYTES = 4 * 1024**3
GPU_GEMM_N = 8192


def probe_gpu() -> dict[str, Any] | None:
    """The first visible GPU's copy bandwidth and bf16 GEMM throughput, measured with PyTorch;
    None where PyTorch or CUDA is not there (the table's peaks then stand alone)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    try:
        return _probe_cuda(torch)
    except RuntimeError as exc:  # out of memory, a busy or odd device: the table's peaks stand
        return {"not_measured": f"{type(exc).__name__}: {exc}"[:300]}


def _probe_cuda(torch: Any) -> dict[str, Any]:
    source = torch.empty(GPU_COPY_BYTES, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    a = torch.randn(GPU_GEMM_N, GPU_GEMM_N, dtype=torch.bfloat16, device="cuda")
    copies = _cuda_timed(torch, lambda: target.copy_(source))
    products = _cuda_timed(torch, lambda: a @ a)
    return {
        "name": torch.cuda.get_device_name(0),
        "copy_bandwidth_bytes_s": 2 * GPU_COPY_BYTES / min(copies),
        "copy_samples_s": copies,
        "copy_method": f"torch device-to-device copy of {GPU_COPY_BYTES} bytes, best of {len(copies)}: "
        "(read + write) / time, CUDA events",
        "gemm_flop_s": 2 * GPU_GEMM_N**3 / min(products),
        "gemm_samples_s": products,
        "gemm_method": f"torch bf16 {GPU_GEMM_N}x{GPU_GEMM_N} matmul on random data, best of "
        f"{len(products)}: 2 n^3 / time, CUDA events",
    }


def _cuda_timed(torch: Any, work, warmups: int = 3, repeats: int = 10) -> list[float]:
    for _ in range(warmups):
        work()
    seconds = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        work()
        end.record()
        torch.cuda.synchronize()
        seconds.append(start.elapsed_time(end) / 1000)
    return seconds


def probe_hardware(file: str, node: str | None = None, threads: int = 1) -> dict[str, Any]:
    """What the ceilings need, for `file` (results/hardware/probe*.json). `node` is the placement
    node it was asked to read: recorded only where it ran there (its Slurm node), since outside
    Slurm every node's probe reads this one machine. `threads`: the most CPU threads an engine uses."""

    gpus = [{**gpu, "peaks": gpu_peaks(gpu["name"])} for gpu in visible_gpus()]
    measured = probe_gpu() if gpus else None
    if measured:
        gpus[0]["measured"] = measured  # CUDA's device 0: the one NVML lists first where both see one GPU
    host = host_identity()
    on_node = node if host["slurm_node"] == node else None
    return {"host": host, "node": on_node, "file": file, "cpu": probe_cpu(threads), "gpus": gpus}
