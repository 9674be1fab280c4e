"""Seeded simulations of the verdict (figures.verdict) at a comparison's shape: how often it says
"differs" when nothing differs (its false-positive rate), how often it finds a true effect (its
power), how often it says "same" of a difference outside the margin, and how often a repeat's point
lands inside a run's interval (what a repeatability check should expect).

Unpaired (two sides of separate processes): each shot's log speed is the side's mean + its process's
offset + the shot's own noise; a process's value is the median of the shots its rule keeps, as
verdict.process_values takes it. Paired (cold against warm inside each process): a process's shot 1
is its level + the effect + shot 1's own noise, its warm shots its level + their noise; the level
cancels in d = shot 1 - median of the kept warm shots, as verdict.paired_values takes them. The
draws run the production functions (log_mean_interval, paired_log_interval, verdict_codes) on whole
arrays at once. Run until decided (measure.looks) is drawn whole by sequential_rates: the looks'
Bonferroni level, a cell's stop at the first look where every phase decides. NOISE_FIXTURE holds
the spreads measured on the project's 2-core VM (tools/noise_fixture.py); fixture_spreads turns them
into the spreads drawn here.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from whichshot.figures.look_decision import look_level
from whichshot.figures.statistic import WarmRule
from whichshot.figures.verdict import (
    DIFFERS_CODE,
    MIN_PROCESSES,
    SAME_CODE,
    UNDECIDED_CODE,
    log_mean_interval,
    paired_log_interval,
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
    reference_between: float | None = None  # the reference side's own spread between processes


@dataclass(frozen=True, order=True)
class PairedShape:
    """How many processes (warm series) a cell has, and how many warm shots of each the rule keeps."""

    processes: int
    warm_shots: int


@dataclass(frozen=True)
class PairedSpread:
    """The noise of a paired comparison: standard deviations of log speed of a process's shot 1 and of
    each of its warm shots about the process's own level (the level itself cancels)."""

    first: float
    within: float
    tails_df: float | None = None  # Student-t draws (heavy tails)


NOISE_FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "noise" / "cpu_2core.json"
PAIRED_PHASES = ("prefill_tok_s", "decode_tok_s")


def fixture_spreads(path: Path = NOISE_FIXTURE) -> dict[str, Any]:
    """The measured noise as spreads to draw: per phase a PairedSpread (shot 1's spread: the measured
    spread of d, which already holds the warm median's, so drawn on top of it the noise is a little
    larger than measured; warm shots: their robust spread) with normal and with heavy (t, 3 degrees of
    freedom) tails; the same with shot 1's classical spread (every wild process counted in full: the
    noisier reading); and the speed-ups' Spread (no-draft and drafted processes' measured spreads)."""
    measured = json.loads(path.read_text())
    paired = {
        phase: [
            PairedSpread(
                measured["paired"][phase]["sd_robust"], measured["warm_shot"][phase]["sd_robust"], tails
            )
            for tails in (None, 3)
        ]
        for phase in PAIRED_PHASES
    }
    classical = {
        phase: PairedSpread(
            measured["paired"][phase]["sd_classical"], measured["warm_shot"][phase]["sd_robust"]
        )
        for phase in PAIRED_PHASES
    }
    between = measured["speedup_between"]
    speedup = Spread(between["drafted"]["sd_robust"], 0.0, reference_between=between["none"]["sd_robust"])
    return {"paired": paired, "paired_classical": classical, "speedup": speedup}


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


def paired_config_shapes(config: dict[str, Any]) -> set[PairedShape]:
    """The paired cold/warm comparisons a checked config makes: each protocol-grid warm cell's
    series, shot 1 against the warm shots its rule keeps."""
    protocol = config["protocol"]
    keep = WarmRule(protocol["warm_fraction"]).keep
    shots = protocol["warm_shots"]
    if shots < 2 or protocol["repeats"] < MIN_PROCESSES:
        return set()
    return {PairedShape(protocol["repeats"], min(keep(shots), shots - 1))}


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
    rng: np.random.Generator,
    sims: int,
    processes: int,
    shots: int,
    spread: Spread,
    between: float | None = None,
) -> np.ndarray:
    """(sims, processes) log values: each process's median shot (its offset's spread `between`, the
    spread's own by default)."""
    between = spread.between if between is None else between
    offsets = _noise(rng, (sims, processes, 1), between, spread.tails_df)
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
    reference = process_logs(rng, sims, shape.reference_processes, shape.reference_shots, spread,
                             spread.reference_between)  # fmt: skip
    point, low, high = log_mean_interval(side, reference)
    return np.expm1(point), np.expm1(low), np.expm1(high)


def paired_differences(
    rng: np.random.Generator, sims: int, shape: PairedShape, spread: PairedSpread, effect: float
) -> np.ndarray:
    """(sims, processes) paired log differences d = log(shot 1) - log(median of the kept warm shots),
    with a true shot 1 / warm of 1 + effect."""
    first = _noise(rng, (sims, shape.processes), spread.first, spread.tails_df) + np.log1p(effect)
    warm = _noise(rng, (sims, shape.processes, shape.warm_shots), spread.within, spread.tails_df)
    return first - np.median(warm, axis=-1)


def paired_rates(
    shape: PairedShape, spread: PairedSpread, effect: float, margin: float, sims: int = 4000, seed: int = 0
) -> dict[str, float]:
    """The share of sims paired comparisons (true delta `effect`) called differs, same, undecided."""
    d = paired_differences(np.random.default_rng(seed), sims, shape, spread, effect)
    _point, low, high = paired_log_interval(d)
    return _shares(verdict_codes(np.expm1(low), np.expm1(high), margin))


def _shares(codes: np.ndarray) -> dict[str, float]:
    return {
        "differs": float(np.mean(codes == DIFFERS_CODE)),
        "same": float(np.mean(codes == SAME_CODE)),
        "undecided": float(np.mean(codes == UNDECIDED_CODE)),
    }


def verdict_rates(
    shape: Shape, spread: Spread, effect: float, margin: float, sims: int = 4000, seed: int = 0
) -> dict[str, float]:
    """The share of sims comparisons (true delta `effect`) the verdict calls differs, same, undecided."""
    _point, low, high = _intervals(np.random.default_rng(seed), shape, spread, effect, sims)
    return _shares(verdict_codes(low, high, margin))


def repeat_coverage(shape: Shape, spread: Spread, sims: int = 4000, seed: int = 0) -> float:
    """The share of independent repeats (same shape, same truth) whose point lies inside the first
    run's interval: what a correctly sized interval gives (about 83 % for large samples; more with
    few processes, where t intervals are wide)."""
    rng = np.random.default_rng(seed)
    _first_point, low, high = _intervals(rng, shape, spread, 0.0, sims)
    repeat_point, _low, _high = _intervals(rng, shape, spread, 0.0, sims)
    return float(np.mean((low <= repeat_point) & (repeat_point <= high)))


@dataclass(frozen=True)
class SequentialRates:
    """A sequential cell's outcome shares (its verdict at the look it stopped at) and series used."""

    differs: float
    same: float
    undecided: float
    mean_series: float


def sequential_rates(
    looks: tuple[int, ...],
    warm_shots: int,
    spreads: dict[str, PairedSpread],
    effects: dict[str, float],
    margin: float,
    sims: int = 4000,
    seed: int = 0,
) -> dict[str, SequentialRates]:
    """Run until decided (measure.looks) drawn sims times: a cell's processes give one paired difference
    per phase (`spreads`, true shot 1 / warm of 1 + `effects[phase]`); after each look every phase's
    interval at the looks' Bonferroni level; the cell stops at the first look where every phase decides,
    else at the last. Per phase: the shares of its verdicts at the stopping look, and the cell's mean
    series used (the same for every phase)."""
    rng = np.random.default_rng(seed)
    level = look_level(len(looks))
    shape = PairedShape(looks[-1], warm_shots)
    d = {
        phase: paired_differences(rng, sims, shape, spread, effects[phase])
        for phase, spread in spreads.items()
    }
    codes = {phase: np.full(sims, UNDECIDED_CODE) for phase in spreads}
    stopped, used = np.zeros(sims, dtype=bool), np.full(sims, looks[-1])
    for n in looks:
        at_look = {}
        for phase, differences in d.items():
            _point, low, high = paired_log_interval(differences[:, :n], level)
            at_look[phase] = verdict_codes(np.expm1(low), np.expm1(high), margin)
        now = ~stopped
        for phase in d:
            codes[phase] = np.where(now, at_look[phase], codes[phase])
        decided = np.all([np.isin(c, (DIFFERS_CODE, SAME_CODE)) for c in at_look.values()], axis=0)
        used = np.where(now & decided, n, used)
        stopped |= decided
    mean_series = float(used.mean())
    return {phase: SequentialRates(**_shares(c), mean_series=mean_series) for phase, c in codes.items()}
