"""Verdicts with the process as the unit of replication.

Cold against warm, paired inside the process (PAIRED_METHOD): each warm series' shot 1 is its
process's cold shot, so each process gives one difference d = log(shot 1) - log(median of its kept
warm shots), and the interval is Student's t over the processes' d's, turned back into a ratio (of
geometric means). The spread between processes (one process decodes 8 % slower than the next) is in
both of a process's values and drops out of d. Where a run has no warm series with a shot 1 (only
separate cold processes), the two sides are compared unpaired (Welch, below).

A comparison sets one side (the cold shots, a drafted cell) against a reference (the warm shots, no
drafting). Shots of one engine process are not independent draws, so each process gives one value
first: the median of the shots its side's rule kept from it (a cold process: its shot 1; a warm
series: its warm shots). The interval is Welch's t interval at LEVEL for the difference of the two
sides' mean log values, turned back into a ratio (of geometric means). Its assumptions: the
processes are independent draws whose log values are near normal (the series run in Snakemake's
job order, not the config's, which mixes the sides in time; drift during a run is then noise
between processes, which the interval carries); the sides may differ in spread (Welch).

With a margin m (protocol.verdict_margin), a comparison of ratio r (less 1 for a relative delta):
- "same within ±m": the interval lies inside [-m, +m];
- "differs": the interval lies wholly outside the margin band (so it leaves out 0 too): a difference
  larger than m, not only one larger than 0;
- "undecided": neither (the interval reaches into the band and out of it);
- "too few processes to tell": fewer than MIN_PROCESSES processes on a side (the range of the ratio
  over every pair of processes is shown instead).
tests/test_verdict_error_rates.py draws data at the shapes the shipped configs use and shows that the
false "differs" rate stays at most 5 % (with no difference, and with one as large as the margin), that
"same within" is said of a difference outside the margin at most 5 % of the time, and states the power
against a 10 % effect.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

LEVEL = 0.95
MIN_PROCESSES = 2  # Welch's interval needs a spread on each side: two processes at least
DIFFERS, SAME, UNDECIDED = "differs", "same within", "undecided"
TOO_FEW = "too few processes to tell"
DIFFERS_CODE, SAME_CODE, UNDECIDED_CODE = 1.0, 0.0, 0.5  # a verdict figure's value; no value: TOO_FEW
VERDICT_CODES = {DIFFERS_CODE: DIFFERS, SAME_CODE: SAME, UNDECIDED_CODE: UNDECIDED}
METHOD = (
    f"each fresh process gives one value (the median of the shots its rule kept); Welch's t interval "
    f"({LEVEL:.0%}) for the difference of the two sides' mean log values, as a ratio of geometric means; "
    f"'same within ±m' where it lies inside the margin, 'differs' where it lies wholly beyond the margin "
    f"(a difference larger than m), else 'undecided'; below {MIN_PROCESSES} processes on a side, "
    f"'{TOO_FEW}'. Assumes independent processes (the series run in Snakemake's order, which mixes the "
    "sides in time)"
)
PAIRED_METHOD = (
    f"paired inside each process: a warm series' shot 1 is its process's cold shot, and each process gives "
    f"d = log(shot 1) - log(median of its kept warm shots); Student's t interval ({LEVEL:.0%}, n - 1 "
    f"degrees of freedom) for the mean of the processes' d's, as a ratio of geometric means; 'same within "
    f"±m' where it lies inside the margin, 'differs' where it lies wholly beyond the margin, else "
    f"'undecided'; below {MIN_PROCESSES} processes, '{TOO_FEW}'. Assumes independent processes; the "
    "spread between processes cancels in d"
)


@dataclass(frozen=True)
class Interval:
    """A comparison's point and interval, as ratios side / reference."""

    point: float
    low: float
    high: float


def process_values(rows: pd.DataFrame, column: str) -> tuple[float, ...]:
    """One value per engine process: the median of its rows' values (in process id order, so that a
    value never depends on the rows' order)."""
    present = rows[rows[column].notna()]
    medians = present.groupby("process_id", sort=True)[column].median()
    return tuple(float(v) for v in medians)


def paired_values(rows: pd.DataFrame, column: str, first_index: int = 1) -> tuple[tuple, tuple]:
    """(first shots, warm values) per engine process that has both, in process id order: a process's
    shot `first_index` and the median of its other rows' values."""
    present = rows[rows[column].notna()]
    is_first = present["shot_index"] == first_index
    firsts = present[is_first].groupby("process_id", sort=True)[column].median()
    warms = present[~is_first].groupby("process_id", sort=True)[column].median()
    both = firsts.index.intersection(warms.index)
    return tuple(float(v) for v in firsts[both]), tuple(float(v) for v in warms[both])


def paired_log_interval(
    differences: np.ndarray, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean difference, low, high) of Student's t interval over the last axis (the processes' paired
    log differences): one comparison per leading index, as log_mean_interval."""
    n = differences.shape[-1]
    mean = differences.mean(axis=-1)
    half = stats.t.ppf(0.5 + level / 2, n - 1) * differences.std(axis=-1, ddof=1) / np.sqrt(n)
    return mean, mean - half, mean + half


def log_mean_interval(
    side_logs: np.ndarray, reference_logs: np.ndarray, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(difference of means, low, high) of Welch's interval, over the last axis of each array (the
    processes): one comparison per leading index, so that a simulation draws thousands at once."""
    side_n, reference_n = side_logs.shape[-1], reference_logs.shape[-1]
    side_var = side_logs.var(axis=-1, ddof=1) / side_n
    reference_var = reference_logs.var(axis=-1, ddof=1) / reference_n
    standard_error = np.sqrt(side_var + reference_var)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (side_var + reference_var) ** 2 / (
            side_var**2 / (side_n - 1) + reference_var**2 / (reference_n - 1)
        )
    df = np.where(np.isfinite(df), df, min(side_n, reference_n) - 1)  # no spread anywhere: a point
    half = stats.t.ppf(0.5 + level / 2, df) * standard_error
    difference = side_logs.mean(axis=-1) - reference_logs.mean(axis=-1)
    return difference, difference - half, difference + half


def ratio_interval(side: Sequence[float], reference: Sequence[float]) -> Interval | None:
    """side / reference with its interval; None with fewer than MIN_PROCESSES values on a side."""
    if min(len(side), len(reference)) < MIN_PROCESSES or min(*side, *reference) <= 0:
        return None
    point, low, high = log_mean_interval(np.log(side), np.log(reference))
    return Interval(float(np.exp(point)), float(np.exp(low)), float(np.exp(high)))


def paired_ratio_interval(
    firsts: Sequence[float], warms: Sequence[float], level: float = LEVEL
) -> Interval | None:
    """First shot / warm value paired per process, with its interval at `level`; None below
    MIN_PROCESSES pairs."""
    if len(firsts) < MIN_PROCESSES or min(*firsts, *warms) <= 0:
        return None
    point, low, high = paired_log_interval(np.log(firsts) - np.log(warms), level)
    return Interval(float(np.exp(point)), float(np.exp(low)), float(np.exp(high)))


def paired_ratio_range(firsts: Sequence[float], warms: Sequence[float]) -> tuple[float, float] | None:
    """The lowest and highest per-process ratio first shot / warm value; None with no pair."""
    if not firsts or min(warms) <= 0:
        return None
    ratios = [f / w for f, w in zip(firsts, warms, strict=True)]
    return min(ratios), max(ratios)


def level_words(level: float) -> str:
    """Where an interval's level is not LEVEL: what it is and why (run until decided)."""
    if level == LEVEL:
        return ""
    looks = round((1 - LEVEL) / (1 - level))
    return (f"; each interval at level {level:.2%} (Bonferroni over the {looks} planned looks of run until "
            "decided, protocol.until_decided)")  # fmt: skip


def resolution(low_delta: float, high_delta: float) -> float:
    """The largest relative difference an interval of relative deltas leaves possible: what a run
    that cannot tell says it can rule out beyond (max |low|, |high|)."""
    return max(abs(low_delta), abs(high_delta))


def ratio_range(side: Sequence[float], reference: Sequence[float]) -> tuple[float, float] | None:
    """The lowest and highest side / reference over every pair of processes (what the data span where
    there are too few processes for an interval); None with a side empty."""
    if not side or not reference or min(reference) <= 0:
        return None
    return min(side) / max(reference), max(side) / min(reference)


def verdict_codes(low: np.ndarray, high: np.ndarray, margin: float) -> np.ndarray:
    """The verdict of each interval of relative deltas (ratio - 1): SAME_CODE inside [-margin, +margin],
    DIFFERS_CODE wholly beyond it on one side, else UNDECIDED_CODE."""
    same = (low >= -margin) & (high <= margin)
    beyond = (low > margin) | (high < -margin)
    return np.where(same, SAME_CODE, np.where(beyond, DIFFERS_CODE, UNDECIDED_CODE))


def verdict_code(low_delta: float | None, high_delta: float | None, margin: float) -> float | None:
    """One interval's verdict code (None: too few processes to tell)."""
    if low_delta is None or high_delta is None:
        return None
    return float(verdict_codes(np.array(low_delta), np.array(high_delta), margin))


def verdict_words(code: float | None, margin: float) -> str:
    """A verdict figure's value in words."""
    if code is None or code != code:
        return TOO_FEW
    words = VERDICT_CODES[float(code)]
    return f"{words} {margin_words(margin)}" if words == SAME else words


def margin_words(margin: float) -> str:
    """0.02 -> '±2 %'."""
    return f"±{margin * 100:g} %"
