"""Record raw NVML samples from a real NVIDIA GPU as a test fixture.

    python tools/capture_nvml_fixture.py tests/fixtures/telemetry/nvml_h200.json

Takes samples idle, then (when torch with CUDA imports) while a bf16 matmul loop keeps the GPU
busy, then right after the load stops. Each sample is what whichshot.telemetry.nvml.read_raw
returned, in NVML's own units, so tests can run decode() on it without a GPU.
"""

import argparse
import json
import math
import sys
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pynvml  # noqa: E402

from whichshot.telemetry.nvml import GpmSampler, read_raw, read_static  # noqa: E402

MATMUL_N = 8192


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_json", type=Path)
    parser.add_argument("--gpu", type=int, default=0, help="GPU index in NVML order")
    parser.add_argument("--idle", type=int, default=3, help="samples before any load")
    parser.add_argument("--load", type=int, default=5, help="samples while the matmuls run")
    parser.add_argument("--after", type=int, default=2, help="samples right after the load")
    parser.add_argument("--interval-s", type=float, default=0.5)
    parser.add_argument("--warmup-s", type=float, default=2.0, help="load before sampling it")
    return parser.parse_args(argv)


def _optional(call: Any, *args: Any) -> Any:
    """call(*args), or the error text: context fields must not stop the capture."""
    try:
        value = call(*args)
    except pynvml.NVMLError as exc:
        return f"{type(exc).__name__}: {exc}"
    return value.decode() if isinstance(value, bytes) else value


def _context(handle: Any) -> dict[str, Any]:
    """What the samples were taken on: versions, limits and clock ceilings."""
    return {
        "driver_version": _optional(pynvml.nvmlSystemGetDriverVersion),
        "nvml_version": _optional(pynvml.nvmlSystemGetNVMLVersion),
        "nvidia_ml_py_version": metadata.version("nvidia-ml-py"),
        "enforced_power_limit_mw": _optional(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle),
        "max_clock_sm_mhz": _optional(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM),
        "max_clock_mem_mhz": _optional(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_MEM),
    }


def _open_gpm(handle: Any) -> tuple[GpmSampler | None, str | None]:
    try:
        if not pynvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
            return None, "GPM not supported on this GPU"
        gpm = GpmSampler(handle)
    except pynvml.NVMLError as exc:
        return None, f"GPM unavailable: {type(exc).__name__}: {exc}"
    gpm.read()  # GPM metrics need a previous sample
    return gpm, None


class Sampler:
    """Takes raw samples tagged with a phase, on the monotonic clock relative to the start."""

    def __init__(self, handle: Any, gpm: GpmSampler | None) -> None:
        self.handle = handle
        self.gpm = gpm
        self.t0_s = time.monotonic()
        self.samples: list[dict[str, Any]] = []

    def take(self, phase: str) -> None:
        t_mono_s = time.monotonic() - self.t0_s
        raw = read_raw(self.handle, self.gpm)
        self.samples.append({"phase": phase, "t_rel_s": round(t_mono_s, 4), "raw": raw})
        print(f"{phase:10s} {raw}", file=sys.stderr)


def _idle(sampler: Sampler, count: int, interval_s: float) -> None:
    for _ in range(count):
        time.sleep(interval_s)
        sampler.take("idle")


def _load_and_after(sampler: Sampler, args: argparse.Namespace) -> dict[str, Any]:
    """Sample while bf16 matmuls are queued on the GPU, then after they drain."""
    try:
        import torch  # imported late: a CUDA context changes idle clocks
    except ImportError as exc:
        return {"ran": False, "reason": f"torch not importable: {exc}"}
    if not torch.cuda.is_available():
        return {"ran": False, "reason": "torch.cuda.is_available() is False"}
    device = torch.device("cuda", args.gpu)
    a = torch.randn(MATMUL_N, MATMUL_N, device=device, dtype=torch.bfloat16)
    b = torch.randn(MATMUL_N, MATMUL_N, device=device, dtype=torch.bfloat16)
    matmul_s = _time_matmul(torch, a, b)
    per_batch = max(1, math.ceil(1.5 * args.interval_s / matmul_s))
    _busy_for(torch, a, b, per_batch, args.warmup_s)
    for _ in range(args.load):
        for _ in range(per_batch):
            torch.mm(a, b)
        time.sleep(args.interval_s)  # the GPU is still working through the queue
        sampler.take("load")
        torch.cuda.synchronize(device)
    for _ in range(args.after):
        time.sleep(args.interval_s / 2)
        sampler.take("after_load")
    return {
        "ran": True,
        "torch_version": torch.__version__,
        "what": f"torch.mm of two {MATMUL_N}x{MATMUL_N} bf16 matrices, {per_batch} queued "
        "per sample, sample taken while the queue runs",
        "matmul_ms": round(matmul_s * 1000, 3),
        "warmup_s": args.warmup_s,
    }


def _time_matmul(torch: Any, a: Any, b: Any) -> float:
    """Seconds per matmul, after a short warm-up."""
    for _ in range(5):
        torch.mm(a, b)
    torch.cuda.synchronize()
    start_s = time.monotonic()
    for _ in range(20):
        torch.mm(a, b)
    torch.cuda.synchronize()
    return (time.monotonic() - start_s) / 20


def _busy_for(torch: Any, a: Any, b: Any, per_batch: int, seconds: float) -> None:
    end_s = time.monotonic() + seconds
    while time.monotonic() < end_s:
        for _ in range(per_batch):
            torch.mm(a, b)
        torch.cuda.synchronize()


def main(argv: list[str]) -> int:
    args = _parse_args(argv)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        print(f"cannot record: NVML init failed ({exc}); needs an NVIDIA GPU", file=sys.stderr)
        return 1
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(args.gpu)
        gpm, gpm_note = _open_gpm(handle)
        sampler = Sampler(handle, gpm)
        _idle(sampler, args.idle, args.interval_s)
        load = _load_and_after(sampler, args)
        fixture = {
            "recorded_by": "tools/capture_nvml_fixture.py",
            "recorded_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "gpu": read_static(handle, args.gpu),
            "context": _context(handle),
            "gpm_note": gpm_note,
            "interval_s": args.interval_s,
            "load": load,
            "samples": sampler.samples,
        }
        if gpm is not None:
            gpm.close()
    finally:
        pynvml.nvmlShutdown()
    args.out_json.parent.mkdir(parents=True, exist_ok=True)
    args.out_json.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {len(sampler.samples)} samples to {args.out_json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
