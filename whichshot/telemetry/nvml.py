"""NVIDIA GPU telemetry through NVML (pynvml from nvidia-ml-py).

read_raw() returns what NVML returns (ints in NVML's units); decode() turns that into sample
columns, so decoding is tested on recorded raw samples without a GPU.
"""

import contextlib
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pynvml

from whichshot.telemetry.base import NVML_COLUMNS, Reading, SensorValue, error_text, not_readable
from whichshot.telemetry.gpus import EVERY_VISIBLE_GPU, GpuChoice, GpuUse, NvmlDevice, choose_gpus

BACKEND = "nvml"

# (pynvml constant suffix, our name). Each bit is looked up under the current name
# (nvmlClocksEventReason*) and the deprecated one (nvmlClocksThrottleReason*), so the
# decoding follows the pynvml that is installed rather than numbers copied here.
_REASON_NAMES: tuple[tuple[str, str], ...] = (
    ("GpuIdle", "gpu_idle"),
    ("ApplicationsClocksSetting", "applications_clocks_setting"),
    ("SwPowerCap", "sw_power_cap"),
    ("HwSlowdown", "hw_slowdown"),
    ("SyncBoost", "sync_boost"),
    ("SwThermalSlowdown", "sw_thermal_slowdown"),
    ("HwThermalSlowdown", "hw_thermal_slowdown"),
    ("HwPowerBrakeSlowdown", "hw_power_brake_slowdown"),
    ("DisplayClockSetting", "display_clock_setting"),
)

# hw_slowdown is left out on purpose: NVML raises it for temperature, power brake or
# over-current alike, so it does not say "thermal" by itself.
THERMAL_REASONS: frozenset[str] = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})


def _reason_bit(suffix: str) -> int | None:
    """The bit pynvml defines for a clock-event reason, under either of its names."""
    for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason"):
        bit = getattr(pynvml, prefix + suffix, None)
        if bit is not None:
            return int(bit)
    return None


def _reason_bits() -> tuple[tuple[int, str], ...]:
    """(bit, name) for every reason pynvml knows, in bit order."""
    pairs = [(_reason_bit(suffix), name) for suffix, name in _REASON_NAMES]
    return tuple(sorted((bit, name) for bit, name in pairs if bit))


REASON_BITS: tuple[tuple[int, str], ...] = _reason_bits()
REASON_ORDER: tuple[str, ...] = tuple(name for _, name in REASON_BITS)


_KNOWN_MASK = sum(bit for bit, _ in REASON_BITS)


def decode_throttle_reasons(mask: int) -> list[str]:
    """Names of the clock-event (throttle) reason bits set in mask; unknown bits by number."""
    names = [name for bit, name in REASON_BITS if mask & bit]
    unknown = mask & ~_KNOWN_MASK
    position = 0
    while unknown >> position:
        if (unknown >> position) & 1:
            names.append(f"unknown_bit_{position}")
        position += 1
    return names


# Raw field read every tick -> the sample column it decodes to.
DYNAMIC_FIELDS: dict[str, str] = {
    "clock_sm_mhz": "gpu_sm_clock_mhz",
    "clock_mem_mhz": "gpu_mem_clock_mhz",
    "power_mw": "gpu_power_w",
    "energy_mj": "gpu_energy_j",
    "temp_c": "gpu_temp_c",
    "clocks_event_reasons": "gpu_throttle_reasons",
}
GPM_FIELDS: dict[str, str] = {
    "gpm_dram_bw_util_pct": "gpu_dram_bw_util_pct",
    "gpm_sm_util_pct": "gpu_sm_util_pct",
}
STATIC_FIELDS: dict[str, str] = {"index": "gpu_index", "name": "gpu_name", "uuid": "gpu_uuid"}
RAW_TO_COLUMN: dict[str, str] = {**STATIC_FIELDS, **DYNAMIC_FIELDS, **GPM_FIELDS}

Reader = Callable[[Any], int]

# nvmlDeviceGetTotalEnergyConsumption cost ~3.4 ms of CPU per call on an H200 (driver
# 580.159.04; the field-value API costs the same) against 2-100 us for each other field, so
# read every tick at 4 Hz it alone would take 1.4 % of a core. It is read every
# ENERGY_INTERVAL_S and on TelemetryRecorder.mark(), which brackets each shot.
SLOW_FIELDS: frozenset[str] = frozenset({"energy_mj"})
ENERGY_INTERVAL_S = 1.0


def _clocks_event_reasons(handle: Any) -> int:
    """The current clock-event reason mask, through the deprecated call on older drivers."""
    try:
        return pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
    except (pynvml.NVMLError_FunctionNotFound, AttributeError):
        return pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)


READERS: dict[str, Reader] = {
    "clock_sm_mhz": lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
    "clock_mem_mhz": lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
    "power_mw": pynvml.nvmlDeviceGetPowerUsage,
    "energy_mj": pynvml.nvmlDeviceGetTotalEnergyConsumption,
    "temp_c": lambda h: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
    "clocks_event_reasons": _clocks_event_reasons,
}


class GpmSampler:
    """GPM metrics over the interval between two consecutive samples.

    A read() within MIN_WINDOW_S of the previous sample (a mark() right after a tick) gives
    None and keeps the previous sample, so every reported window is at least that long.
    """

    MIN_WINDOW_S = 0.1

    METRIC_IDS: dict[str, int] = {
        "gpm_dram_bw_util_pct": pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
        "gpm_sm_util_pct": pynvml.NVML_GPM_METRIC_SM_UTIL,
    }

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._prev = pynvml.nvmlGpmSampleAlloc()
        self._cur = pynvml.nvmlGpmSampleAlloc()
        self._have_prev = False
        self._prev_s = -math.inf
        # One query struct (~19 KB) reused every tick rather than built each time.
        self._query = pynvml.c_nvmlGpmMetricsGet_t()
        self._query.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        self._query.numMetrics = len(self.METRIC_IDS)
        for slot, metric_id in enumerate(self.METRIC_IDS.values()):
            self._query.metrics[slot].metricId = metric_id

    def read(self) -> tuple[dict[str, float | None], dict[str, str]]:
        """Metric values since the previous read; None (no error) on the first read."""
        values: dict[str, float | None] = dict.fromkeys(self.METRIC_IDS)
        now_s = time.monotonic()
        if now_s - self._prev_s < self.MIN_WINDOW_S:
            return values, {}
        try:
            pynvml.nvmlGpmSampleGet(self._handle, self._cur)
        except pynvml.NVMLError as exc:
            self._have_prev = False
            return values, dict.fromkeys(self.METRIC_IDS, f"nvmlGpmSampleGet: {error_text(exc)}")
        self._prev_s = now_s
        if not self._have_prev:
            self._swap()
            return values, {}
        errors = self._metrics_into(values)
        self._swap()
        return values, errors

    def _metrics_into(self, values: dict[str, float | None]) -> dict[str, str]:
        """Fill values from nvmlGpmMetricsGet over (prev, cur); return per-metric errors."""
        self._query.sample1 = self._prev
        self._query.sample2 = self._cur
        try:
            pynvml.nvmlGpmMetricsGet(self._query)
        except pynvml.NVMLError as exc:
            return dict.fromkeys(self.METRIC_IDS, f"nvmlGpmMetricsGet: {error_text(exc)}")
        errors: dict[str, str] = {}
        for slot, field in enumerate(self.METRIC_IDS):
            metric = self._query.metrics[slot]
            if metric.nvmlReturn == pynvml.NVML_SUCCESS:
                values[field] = float(metric.value)
            else:
                text = error_text(pynvml.NVMLError(metric.nvmlReturn))
                errors[field] = f"nvmlGpmMetricsGet metric {metric.metricId}: {text}"
        return errors

    def _swap(self) -> None:
        self._prev, self._cur = self._cur, self._prev
        self._have_prev = True

    def close(self) -> None:
        """Free both GPM sample buffers."""
        for sample in (self._prev, self._cur):
            with contextlib.suppress(pynvml.NVMLError):
                pynvml.nvmlGpmSampleFree(sample)


def read_static(handle: Any, index: int) -> dict[str, Any]:
    """Fields that do not change while the process runs."""
    name = pynvml.nvmlDeviceGetName(handle)
    uuid = pynvml.nvmlDeviceGetUUID(handle)
    return {
        "index": index,
        "name": name.decode() if isinstance(name, bytes) else name,
        "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
    }


def read_raw(
    handle: Any, gpm: GpmSampler | None = None, fields: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """Raw NVML values for fields (default: all dynamic ones); failures under 'errors'."""
    raw: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for field in DYNAMIC_FIELDS if fields is None else fields:
        try:
            raw[field] = READERS[field](handle)
        except pynvml.NVMLError as exc:
            raw[field] = None
            errors[field] = error_text(exc)
    if gpm is not None:
        gpm_values, gpm_errors = gpm.read()
        raw.update(gpm_values)
        errors.update(gpm_errors)
    raw["errors"] = errors
    return raw


def _scaled(value: int | None, divisor: float) -> float | None:
    return None if value is None else value / divisor


def decode(raw: dict[str, Any]) -> dict[str, SensorValue]:
    """Sample columns from a raw NVML record: mW -> W, mJ -> J, reason mask -> names."""
    mask = raw.get("clocks_event_reasons")
    return {
        "gpu_index": raw.get("index"),
        "gpu_name": raw.get("name"),
        "gpu_uuid": raw.get("uuid"),
        "gpu_sm_clock_mhz": raw.get("clock_sm_mhz"),
        "gpu_mem_clock_mhz": raw.get("clock_mem_mhz"),
        "gpu_power_w": _scaled(raw.get("power_mw"), 1000.0),
        "gpu_energy_j": _scaled(raw.get("energy_mj"), 1000.0),
        "gpu_temp_c": raw.get("temp_c"),
        "gpu_throttle_reasons": None if mask is None else "|".join(decode_throttle_reasons(mask)),
        "gpu_dram_bw_util_pct": raw.get("gpm_dram_bw_util_pct"),
        "gpu_sm_util_pct": raw.get("gpm_sm_util_pct"),
    }


@dataclass
class _Gpu:
    handle: Any
    static: dict[str, Any]
    fields: tuple[str, ...]
    gpm: GpmSampler | None


# How the readings of several GPUs an engine spans make one sample: power and energy add up, the
# slowest clock and the hottest GPU stand for all, throttle reasons join, utilisations average.
_COMBINE: dict[str, Callable[[list], Any]] = {
    "gpu_power_w": sum,
    "gpu_energy_j": sum,
    "gpu_sm_clock_mhz": min,
    "gpu_mem_clock_mhz": min,
    "gpu_temp_c": max,
    "gpu_throttle_reasons": lambda masks: "|".join(sorted({r for m in masks for r in m.split("|") if r})),
    "gpu_dram_bw_util_pct": statistics.fmean,
    "gpu_sm_util_pct": statistics.fmean,
}


def combine_gpus(readings: list[dict[str, SensorValue]]) -> dict[str, SensorValue]:
    """One sample from the readings of each sampled GPU (a column missing on any GPU is None)."""
    if len(readings) == 1:
        return readings[0]
    combined: dict[str, SensorValue] = {
        "gpu_index": None,
        "gpu_name": "|".join(dict.fromkeys(str(r["gpu_name"]) for r in readings)),
        "gpu_uuid": "|".join(str(r["gpu_uuid"]) for r in readings),
    }
    for column, how in _COMBINE.items():
        values = [r.get(column) for r in readings]
        combined[column] = None if any(v is None for v in values) else how(values)
    return combined


class NvmlBackend:
    """The GPUs' clocks, power, energy, temperature, throttle reasons and GPM metrics: one GPU's,
    or the combined readings of every GPU the engine spans (combine_gpus says how)."""

    name = BACKEND
    columns = NVML_COLUMNS

    def __init__(self, gpus: list[_Gpu], energy_interval_s: float = ENERGY_INTERVAL_S) -> None:
        self._gpus = gpus
        self._energy_interval_s = energy_interval_s
        self._slow_read_s = -math.inf

    @property
    def uuids(self) -> tuple[str, ...]:
        return tuple(gpu.static["uuid"] for gpu in self._gpus)

    def read(self, full: bool = False) -> Reading:
        """One NVML read; the energy counter only every energy_interval_s, or when full."""
        now_s = time.monotonic()
        # 10 % slack so a tick that wakes a little early still counts as due.
        slow_due = full or now_s - self._slow_read_s >= 0.9 * self._energy_interval_s
        if slow_due:
            self._slow_read_s = now_s
        readings, errors = [], {}
        for gpu in self._gpus:
            fields = gpu.fields if slow_due else tuple(f for f in gpu.fields if f not in SLOW_FIELDS)
            raw = read_raw(gpu.handle, gpu.gpm, fields)
            errors.update({RAW_TO_COLUMN[field]: text for field, text in raw.pop("errors").items()})
            readings.append(decode({**gpu.static, **raw}))
        return Reading(combine_gpus(readings), errors)

    def close(self) -> None:
        """Free GPM buffers and release this backend's NVML reference."""
        for gpu in self._gpus:
            if gpu.gpm is not None:
                gpu.gpm.close()
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _probe_fields(handle: Any) -> tuple[tuple[str, ...], list[dict[str, str]]]:
    """Dynamic fields that read once without error, and caveats for the rest."""
    readable: list[str] = []
    caveats: list[dict[str, str]] = []
    for field, column in DYNAMIC_FIELDS.items():
        try:
            READERS[field](handle)
            readable.append(field)
        except pynvml.NVMLError as exc:
            caveats += not_readable((column,), BACKEND, f"NVML read failed: {error_text(exc)}")
    return tuple(readable), caveats


def _open_gpm(handle: Any, wanted: bool = True) -> tuple[GpmSampler | None, list[dict[str, str]]]:
    """A GPM sampler if wanted, this GPU supports GPM and a first sample works, else caveats."""
    columns = tuple(GPM_FIELDS.values())
    if not wanted:
        return None, not_readable(columns, BACKEND, "GPM sampling turned off")
    try:
        support = pynvml.nvmlGpmQueryDeviceSupport(handle)
    except (pynvml.NVMLError, AttributeError) as exc:
        return None, not_readable(columns, BACKEND, f"GPM query failed: {error_text(exc)}")
    if not support.isSupportedDevice:
        reason = "GPM unsupported on this GPU (nvmlGpmQueryDeviceSupport: not supported)"
        return None, not_readable(columns, BACKEND, reason)
    try:
        gpm = GpmSampler(handle)
    except pynvml.NVMLError as exc:
        return None, not_readable(columns, BACKEND, f"GPM sample alloc failed: {error_text(exc)}")
    _, errors = gpm.read()
    if errors:
        gpm.close()
        first_error = next(iter(errors.values()))
        return None, not_readable(columns, BACKEND, f"GPM sample failed: {first_error}")
    return gpm, []


def list_devices() -> list[NvmlDevice]:
    """Every GPU NVML sees and this process may open (NVML initialised). A GPU a cgroup withholds
    (Slurm's ConstrainDevices) is left out, as CUDA leaves it out of its numbering."""
    devices = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            static = read_static(handle, index)
            bus_id = pynvml.nvmlDeviceGetPciInfo(handle).busId
        except pynvml.NVMLError:
            continue
        bus_id = bus_id.decode() if isinstance(bus_id, bytes) else bus_id
        devices.append(NvmlDevice(index, static["uuid"], bus_id, static["name"]))
    return devices


def running_pids_by_uuid() -> dict[str, set[int]]:
    """The PIDs NVML lists as computing (or drawing) on each GPU (NVML initialised)."""
    by_uuid: dict[str, set[int]] = {}
    for device in list_devices():
        handle = pynvml.nvmlDeviceGetHandleByIndex(device.index)
        pids: set[int] = set()
        for lister in (
            pynvml.nvmlDeviceGetComputeRunningProcesses,
            pynvml.nvmlDeviceGetGraphicsRunningProcesses,
        ):
            with contextlib.suppress(pynvml.NVMLError):
                pids |= {process.pid for process in lister(handle)}
        by_uuid[device.uuid] = pids
    return by_uuid


Opened = tuple[NvmlBackend | None, list[dict[str, str]], GpuChoice]


def open_nvml(index: int | None = None, gpm: bool = True, use: GpuUse = EVERY_VISIBLE_GPU) -> Opened:
    """Init NVML once and open the GPUs the engine uses (use, resolved by gpus.choose_gpus), or
    NVML's GPU `index` when the config names one; None plus caveats when impossible.
    gpm=False leaves GPM (DRAM bandwidth, SM utilisation) off: those columns are not measured."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        reason = f"no NVIDIA driver (NVML init failed: {exc})"
        return None, not_readable(NVML_COLUMNS, BACKEND, reason), GpuChoice((), "not chosen", reason)
    try:
        devices = list_devices()
        choice = _choice(index, use, devices)
        chosen = [d for uuid in choice.uuids for d in devices if d.uuid == uuid]
        gpus, caveats = [], []
        for device in chosen:
            handle = pynvml.nvmlDeviceGetHandleByIndex(device.index)
            fields, field_caveats = _probe_fields(handle)
            sampler, gpm_caveats = _open_gpm(handle, wanted=gpm)
            gpus.append(_Gpu(handle, read_static(handle, device.index), fields, sampler))
            caveats += field_caveats + gpm_caveats
    except pynvml.NVMLError as exc:
        pynvml.nvmlShutdown()
        reason = f"NVML device open failed: {exc}"
        return None, not_readable(NVML_COLUMNS, BACKEND, reason), GpuChoice((), "not chosen", reason)
    if not gpus:
        pynvml.nvmlShutdown()
        return None, not_readable(NVML_COLUMNS, BACKEND, choice.problem or choice.how), choice
    return NvmlBackend(gpus), _unique(caveats), choice


def _choice(index: int | None, use: GpuUse, devices: list[NvmlDevice]) -> GpuChoice:
    if index is None:
        return choose_gpus(use, os.environ, devices)
    if index >= len(devices):
        return GpuChoice((), "not chosen", f"no NVIDIA GPU at index {index} (NVML sees {len(devices)})")
    return GpuChoice((devices[index].uuid,), f"NVML index {index}, as telemetry.backends names it")


def _unique(caveats: list[dict[str, str]]) -> list[dict[str, str]]:
    return [dict(items) for items in dict.fromkeys(tuple(c.items()) for c in caveats)]
