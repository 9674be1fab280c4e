"""The contract every telemetry backend keeps, and the fixed columns of a sample."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

SensorValue = float | int | str | None
Sample = dict[str, SensorValue]

# Columns the recorder itself fills in every sample.
META_COLUMNS: tuple[str, ...] = ("t_mono_s", "lateness_s", "telemetry_backends")

NVML_COLUMNS: tuple[str, ...] = (
    "gpu_index",
    "gpu_name",
    "gpu_uuid",
    "gpu_sm_clock_mhz",
    "gpu_mem_clock_mhz",
    "gpu_power_w",
    "gpu_energy_j",
    "gpu_temp_c",
    "gpu_throttle_reasons",
    "gpu_dram_bw_util_pct",
    "gpu_sm_util_pct",
)

LINUX_COLUMNS: tuple[str, ...] = (
    "cpu_freq_mhz",
    "cpu_freq_source",
    "cpu_energy_j",
    "cpu_temp_c",
)

MAC_COLUMNS: tuple[str, ...] = (
    "mac_gpu_freq_mhz",
    "mac_gpu_power_w",
    "mac_cpu_power_w",
    "mac_package_power_w",
)

# Every sample carries every column, None where its backend is absent or the sensor unreadable,
# so telemetry.parquet has one schema on every machine.
SAMPLE_COLUMNS: tuple[str, ...] = META_COLUMNS + NVML_COLUMNS + LINUX_COLUMNS + MAC_COLUMNS

# Cumulative counters: a shot's value is the delta between readings that bracket it.
COUNTER_COLUMNS: tuple[str, ...] = ("gpu_energy_j", "cpu_energy_j")

NOT_READABLE = "sensor_not_readable"
# The sensor is read, but from a source weaker than the preferred one (reason says which).
FALLBACK = "sensor_fallback"


@dataclass
class Reading:
    """One read of a backend: values by column, and error text for sensors that failed this time."""

    values: dict[str, SensorValue]
    errors: dict[str, str] = field(default_factory=dict)


class Backend(Protocol):
    """A source of sensor columns, opened once and read once per sampler tick."""

    name: str
    columns: tuple[str, ...]

    def read(self, full: bool = False) -> Reading:
        """Read the sensors found readable at open; a sensor failing now goes in errors.

        Slow sensors may be read only every so often (their column None in between);
        full=True reads them now.
        """
        ...

    def close(self) -> None:
        """Release handles and files."""
        ...


def caveat(kind: str, sensor: str, backend: str, reason: str) -> dict[str, str]:
    """One caveat record as the report consumes it."""
    return {"id": kind, "sensor": sensor, "backend": backend, "reason": reason}


def not_readable(columns: tuple[str, ...], backend: str, reason: str) -> list[dict[str, str]]:
    """A sensor_not_readable caveat for each of columns."""
    return [caveat(NOT_READABLE, column, backend, reason) for column in columns]


def error_text(exc: BaseException) -> str:
    """Exception as 'Type: message', for gaps and caveats."""
    return f"{type(exc).__name__}: {exc}"


def empty_values(columns: tuple[str, ...]) -> dict[str, SensorValue]:
    """All columns None: what a backend gives for sensors it cannot read."""
    return dict.fromkeys(columns)


def check_columns(values: Mapping[str, SensorValue]) -> None:
    """Raise if values hold a column outside SAMPLE_COLUMNS (a typo would silently vanish)."""
    unknown = set(values) - set(SAMPLE_COLUMNS)
    if unknown:
        raise KeyError(f"not sample columns: {sorted(unknown)}")
