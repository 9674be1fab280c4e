"""Per-shot telemetry summary: the columns shots.parquet carries for each shot."""

import statistics
from collections.abc import Sequence
from itertools import pairwise

from whichshot.shots.checks import counter_power_w, power_agrees_with_counter
from whichshot.telemetry.base import Sample
from whichshot.telemetry.nvml import REASON_ORDER, THERMAL_REASONS

# The energy counter split at the first token, and the counter updates each part rests on.
PHASE_COLUMNS: tuple[str, ...] = (
    "prefill_gpu_energy_j",
    "decode_gpu_energy_j",
    "energy_split_gap_s",
    "energy_counter_updates",
    "prefill_energy_counter_updates",
    "decode_energy_counter_updates",
)
SUMMARY_COLUMNS: tuple[str, ...] = (
    "sm_clock_median_mhz",
    "sm_clock_min_mhz",
    "mem_clock_median_mhz",
    "gpu_power_median_w",
    "gpu_power_reliable",
    "gpu_energy_j",
    "gpu_energy_power_w",
    "energy_j_per_token",
    *PHASE_COLUMNS,
    "gpu_temp_max_c",
    "throttle_reasons_seen",
    "thermal_throttle_seen",
    "dram_bw_util_median_pct",
    "prefill_dram_bw_util_median_pct",
    "sm_util_median_pct",
    "cpu_freq_median_mhz",
    "cpu_energy_j",
    "cpu_temp_max_c",
    "telemetry_samples",
    "telemetry_backends",
)


def _values(samples: Sequence[Sample], column: str) -> list:
    return [s[column] for s in samples if s.get(column) is not None]


def _median(samples: Sequence[Sample], column: str) -> float | None:
    values = _values(samples, column)
    return float(statistics.median(values)) if values else None


def _min(samples: Sequence[Sample], column: str) -> float | None:
    values = _values(samples, column)
    return min(values) if values else None


def _max(samples: Sequence[Sample], column: str) -> float | None:
    values = _values(samples, column)
    return max(values) if values else None


def counter_delta(samples: Sequence[Sample], column: str, t_start_s: float, t_end_s: float) -> float | None:
    """Counter at the first reading at/after t_end minus the last at/before t_start."""
    readings = [(s["t_mono_s"], s[column]) for s in samples if s.get(column) is not None]
    before = [value for t_mono_s, value in readings if t_mono_s <= t_start_s]
    after = [value for t_mono_s, value in readings if t_mono_s >= t_end_s]
    if not before or not after:
        return None
    delta = after[0] - before[-1]
    return delta if delta >= 0 else None  # a counter that went back was reset: no value


def _counter_readings(samples: Sequence[Sample], column: str, t_start_s: float, t_end_s: float) -> list:
    """(t, value) of the counter from the last reading at/before t_start to the first at/after t_end;
    [] when either end has no reading or the counter went back inside (a reset)."""
    readings = sorted((s["t_mono_s"], s[column]) for s in samples if s.get(column) is not None)
    first = max((i for i, (t, _) in enumerate(readings) if t <= t_start_s), default=None)
    last = min((i for i, (t, _) in enumerate(readings) if t >= t_end_s), default=None)
    if first is None or last is None:
        return []
    window = readings[first : last + 1]
    if any(b < a for (_, a), (_, b) in pairwise(window)):
        return []
    return window


def _updates(readings: list) -> int:
    """How many readings show a value that differs from the reading before them."""
    return sum(b != a for (_, a), (_, b) in pairwise(readings))


def energy_phases(
    samples: Sequence[Sample], t_start_s: float, t_end_s: float, first_token_s: float | None
) -> dict:
    """The shot's counter energy split at the first token into prefill and decode, and how many
    counter updates each part rests on.

    NVML's counter is read only every ENERGY_INTERVAL_S and at mark() (the shot's edges), so the
    first token usually falls between two readings a and b: the counter there is interpolated in
    time between them, which misplaces at most energy_split_gap_s × the power swing inside [a, b]
    (energy_split_gap_s: seconds from the first token to the nearer of a and b; 0 when a reading
    falls on it). prefill + decode = gpu_energy_j. Updates count the readings whose value moved:
    the prefill's up to a, the decode's from b on (the interval holding the first token is the
    split's, in neither), the shot's across its whole window."""
    phases: dict = dict.fromkeys(PHASE_COLUMNS)
    readings = _counter_readings(samples, "gpu_energy_j", t_start_s, t_end_s)
    if not readings:
        return phases
    phases["energy_counter_updates"] = _updates(readings)
    if first_token_s is None or not t_start_s <= first_token_s <= t_end_s:
        return phases
    a = max(i for i, (t, _) in enumerate(readings) if t <= first_token_s)
    b = min(i for i, (t, _) in enumerate(readings) if t >= first_token_s)
    (t_a, e_a), (t_b, e_b) = readings[a], readings[b]
    e_first = e_a if b == a else e_a + (e_b - e_a) * (first_token_s - t_a) / (t_b - t_a)
    phases.update(
        prefill_gpu_energy_j=e_first - readings[0][1],
        decode_gpu_energy_j=readings[-1][1] - e_first,
        energy_split_gap_s=min(first_token_s - t_a, t_b - first_token_s),
        prefill_energy_counter_updates=_updates(readings[: a + 1]),
        decode_energy_counter_updates=_updates(readings[b:]),
    )
    return phases


def _union_in_order(labels: list[str], order: Sequence[str]) -> list[str]:
    """Distinct '|'-separated names of labels, known ones in `order`, others after, sorted."""
    seen = {name for label in labels for name in label.split("|") if name}
    return [n for n in order if n in seen] + sorted(seen - set(order))


def _throttle(window: Sequence[Sample]) -> tuple[str | None, bool | None]:
    """('|'-joined reasons seen, whether a thermal one was among them); None if never read."""
    labels = _values(window, "gpu_throttle_reasons")
    if not labels:
        return None, None
    reasons = _union_in_order(labels, REASON_ORDER)
    return "|".join(reasons), bool(THERMAL_REASONS & set(reasons))


def _backends(window: Sequence[Sample]) -> str | None:
    labels = _values(window, "telemetry_backends")
    if not labels:
        return None
    names: list[str] = []
    for label in labels:
        names += [n for n in label.split("|") if n and n not in names]
    return "|".join(names)


def _per_token(energy_j: float | None, streams_output_tokens: int | None) -> float | None:
    """The shot's energy over every stream's output tokens (the streams in flight shared the counter)."""
    if energy_j is None or not streams_output_tokens or streams_output_tokens <= 0:
        return None
    return energy_j / streams_output_tokens


def _prefill_median(window: Sequence[Sample], first_token_s: float | None, column: str) -> float | None:
    """The median of a column over the shot's samples up to its first token (None without one)."""
    if first_token_s is None:
        return None
    return _median([s for s in window if s["t_mono_s"] <= first_token_s], column)


def summarize_shot(
    samples: Sequence[Sample],
    t_start_s: float,
    t_end_s: float,
    output_tokens: int | None,
    first_token_s: float | None = None,
) -> dict:
    """SUMMARY_COLUMNS for one shot; None wherever nothing was measured.

    output_tokens is every stream's output tokens together (the shot column streams_output_tokens):
    with N requests in flight the counter's energy is all N streams', so energy_j_per_token divides
    it by all their tokens, not stream 1's alone.

    Medians, minima and maxima use samples with t_mono_s in [t_start_s, t_end_s]; energies are
    counter deltas from the last reading at/before t_start_s to the first at/after t_end_s, so
    pass samples reaching past both ends (TelemetryRecorder.samples_around does). The energy
    then covers a little more than the shot: as little as the counter's own update period
    (~100 ms on an H200) when TelemetryRecorder.mark() was called at both edges. With the first
    token's time (first_token_s) the energy is split into prefill and decode (energy_phases).
    """
    window = [s for s in samples if t_start_s <= s["t_mono_s"] <= t_end_s]
    power_median_w = _median(window, "gpu_power_w")
    gpu_energy_j = counter_delta(samples, "gpu_energy_j", t_start_s, t_end_s)
    energy_power_w = counter_power_w(gpu_energy_j, t_end_s - t_start_s)
    throttle_seen, thermal_seen = _throttle(window)
    phases = energy_phases(samples, t_start_s, t_end_s, first_token_s)
    return {
        "sm_clock_median_mhz": _median(window, "gpu_sm_clock_mhz"),
        "sm_clock_min_mhz": _min(window, "gpu_sm_clock_mhz"),
        "mem_clock_median_mhz": _median(window, "gpu_mem_clock_mhz"),
        "gpu_power_median_w": power_median_w,
        "gpu_power_reliable": power_agrees_with_counter(power_median_w, energy_power_w),
        "gpu_energy_j": gpu_energy_j,
        "gpu_energy_power_w": energy_power_w,
        "energy_j_per_token": _per_token(gpu_energy_j, output_tokens),
        **phases,
        "gpu_temp_max_c": _max(window, "gpu_temp_c"),
        "throttle_reasons_seen": throttle_seen,
        "thermal_throttle_seen": thermal_seen,
        "dram_bw_util_median_pct": _median(window, "gpu_dram_bw_util_pct"),
        "prefill_dram_bw_util_median_pct": _prefill_median(window, first_token_s, "gpu_dram_bw_util_pct"),
        "sm_util_median_pct": _median(window, "gpu_sm_util_pct"),
        "cpu_freq_median_mhz": _median(window, "cpu_freq_mhz"),
        "cpu_energy_j": counter_delta(samples, "cpu_energy_j", t_start_s, t_end_s),
        "cpu_temp_max_c": _max(window, "cpu_temp_c"),
        "telemetry_samples": len(window),
        "telemetry_backends": _backends(window),
    }
