"""Seeded simulations of the verdict (figures.verdict) at a comparison's shape: how often it says
"differs" when nothing differs (its false-positive rate), how often it finds a true effect (its
power), how often it says "same" of a difference outside the margin, and how often a repeat's point
lands inside a run's interval (what a repeatability check should expect).

Each shot's log speed is the side's mean + its process's offset + the shot's own noise; a process's
value is the median of the shots its rule keeps, as verdict.process_values takes it. The draws run
the production functions (log_mean_interval, verdict_codes) on whole arrays at once.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from whichshot.figures.statistic import WarmRule
from whichshot.figures.verdict import (
    DIFFERS_CODE,
    MIN_PROCESSES,
    SAME_CODE,
    UNDECIDED_CODE,
    log_mean_interval,
    verdict_codes,
)
from whichshot.measure.grid import workload_protocol


@dataclass(frozen=True, order=True)
class Shape:
    """How many processes each side has and how many shots of each its rule keeps."""

    side_processes: int
    side_shots: int
    reference_processes: int
    reference_shots: int


@dataclass(frozen=True)
class Spread:
    """The noise: standard deviations of log speed between processes and between shots of one."""

    between: float
    within: float
    tails_df: float | None = None  # Student-t draws of this many degrees of freedom (heavy tails)
    slow_share: float = 0.0  # share of processes slowed by slow_by (a host with a slow mode)
    slow_by: float = 0.0


# Spreads of log speed to prove the verdict under: 2 % between processes (the issue that asked for
# the proof), a quiet and a noisy host, heavy tails, and a host with a slow mode in a fifth of its
# processes.
SPREADS = (
    Spread(between=0.02, within=0.01),
    Spread(between=0.005, within=0.03),
    Spread(between=0.05, within=0.02),
    Spread(between=0.02, within=0.01, tails_df=3),
    Spread(between=0.01, within=0.01, slow_share=0.2, slow_by=0.08),
)


def config_shapes(config: dict[str, Any]) -> set[Shape]:
    """The shapes of the comparisons a checked config makes that can reach a verdict: cold against
    warm in the protocol grid, a drafted cell against no drafting under each protocol its workloads
    run (grid.expand_jobs and expand_workload_jobs make the series)."""
    protocol = config["protocol"]
    keep = WarmRule(protocol["warm_fraction"]).keep

    def warm(repeats: int, shots: int) -> tuple[int, int]:
        return repeats, min(keep(shots), shots - 1)  # a process's shot 1 is never a warm shot

    shapes = set()
    if protocol["cold_processes"] and protocol["warm_shots"] > 1:
        repeats = protocol["repeats"]
        shapes.add(Shape(protocol["cold_processes"] * repeats, 1, *warm(repeats, protocol["warm_shots"])))
    if config["workloads"]["names"] and len(config["spec_modes"]) > 1:
        workloads = workload_protocol(config)
        repeats, cold, shots = workloads["repeats"], workloads["cold_processes"], workloads["warm_shots"]
        if cold:
            shapes.add(Shape(cold * repeats, 1, cold * repeats, 1))
        if shots > 1:
            shapes.add(Shape(*warm(repeats, shots), *warm(repeats, shots)))
    return {s for s in shapes if min(s.side_processes, s.reference_processes) >= MIN_PROCESSES}


def process_logs(
    rng: np.random.Generator, sims: int, processes: int, shots: int, spread: Spread
) -> np.ndarray:
    """(sims, processes) log values: each process's median shot."""
    offsets = _noise(rng, (sims, processes, 1), spread.between, spread.tails_df)
    slowed = rng.random((sims, processes, 1)) < spread.slow_share
    offsets = offsets + np.where(slowed, np.log1p(-spread.slow_by), 0.0)
    shot_noise = _noise(rng, (sims, processes, shots), spread.within, spread.tails_df)
    return np.median(offsets + shot_noise, axis=-1)


def _noise(rng: np.random.Generator, size: tuple, sd: float, tails_df: float | None) -> np.ndarray:
    if tails_df is None:
        return rng.normal(0.0, sd, size)
    unit_variance = np.sqrt(tails_df / (tails_df - 2))  # a t draw scaled to standard deviation sd
    return rng.standard_t(tails_df, size) * sd / unit_variance


def _intervals(
    rng: np.random.Generator, shape: Shape, spread: Spread, effect: float, sims: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(point, low, high) as relative deltas of sims comparisons whose true side / reference is
    1 + effect."""
    side = process_logs(rng, sims, shape.side_processes, shape.side_shots, spread) + np.log1p(effect)
    reference = process_logs(rng, sims, shape.reference_processes, shape.reference_shots, spread)
    point, low, high = log_mean_interval(side, reference)
    return np.expm1(point), np.expm1(low), np.expm1(high)


def verdict_rates(
    shape: Shape, spread: Spread, effect: float, margin: float, sims: int = 4000, seed: int = 0
) -> dict[str, float]:
    """The share of sims comparisons (true delta `effect`) the verdict calls differs, same, undecided."""
    _point, low, high = _intervals(np.random.default_rng(seed), shape, spread, effect, sims)
    codes = verdict_codes(low, high, margin)
    return {
        "differs": float(np.mean(codes == DIFFERS_CODE)),
        "same": float(np.mean(codes == SAME_CODE)),
        "undecided": float(np.mean(codes == UNDECIDED_CODE)),
    }


def repeat_coverage(shape: Shape, spread: Spread, sims: int = 4000, seed: int = 0) -> float:
    """The share of independent repeats (same shape, same truth) whose point lies inside the first
    run's interval: what a correctly sized interval gives (about 83 % for large samples; more with
    few processes, where t intervals are wide)."""
    rng = np.random.default_rng(seed)
    _first_point, low, high = _intervals(rng, shape, spread, 0.0, sims)
    repeat_point, _low, _high = _intervals(rng, shape, spread, 0.0, sims)
    return float(np.mean((low <= repeat_point) & (repeat_point <= high)))
