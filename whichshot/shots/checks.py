"""Checks of one shot's telemetry against itself: the sampled power median against the energy
counter's mean power (the summary records it, an older shots table is upgraded with it)."""

# NVML's power reading is a trailing average (about a second on recent GPUs), so its median over a
# short shot partly describes what ran before it: on the H200, 1.25-1.4 s prefill shots read
# 0.60-0.74 of the energy counter's mean power. The counter is not averaged, so a shot's power
# median counts as reliable only where it agrees with the counter within this fraction.
POWER_COUNTER_AGREEMENT = 0.15


def counter_power_w(energy_j: float | None, seconds: float) -> float | None:
    """Mean power over a window from the energy counter's delta; None without a delta."""
    if energy_j is None or seconds <= 0:
        return None
    return energy_j / seconds


def power_agrees_with_counter(median_w: float | None, counter_w: float | None) -> bool | None:
    """Whether the sampled power median agrees with the counter's mean power; None if either is missing."""
    if median_w is None or counter_w is None or counter_w <= 0:
        return None
    return abs(median_w / counter_w - 1) <= POWER_COUNTER_AGREEMENT
