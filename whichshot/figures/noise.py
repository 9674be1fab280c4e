"""Noise verdicts from the data: a seeded percentile bootstrap of the ratio of two groups of shots.

Each side is summarised by the statistic its point figure uses ("median": the median of every
value; "median_of_series_medians": the median of the series' medians). A side resamples whole
series when it has two or more series with values, else single shots. With fewer than two
resampling units on a side there is no interval, and the verdict is "too few shots to tell". The
verdict is "beyond noise" when the interval leaves out the null (ratio 1, delta 0), else "within
noise". Pure functions: the same rows and parameters give the same interval, so a figure built on
one is recomputed from what it cites.
"""

import statistics
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

RESAMPLES = 2000
SEED = 32  # fixed: a report's intervals are the same every time it is rendered
LEVEL = 0.95
MIN_UNITS = 2
BEYOND_NOISE = "beyond noise"
WITHIN_NOISE = "within noise"
TOO_FEW = "too few shots to tell"
VERDICT_CODES = {1.0: BEYOND_NOISE, 0.0: WITHIN_NOISE}  # a verdict figure's value; no value: TOO_FEW
METHOD = (
    f"seeded percentile bootstrap ({RESAMPLES} resamples, seed {SEED}, {LEVEL:.0%} interval): each side "
    "resamples its series where it has two or more, else its shots, and is summarised by its own "
    "statistic; no interval with fewer than two series or shots on a side"
)
_STATISTICS = ("median", "median_of_series_medians")
Units = tuple[tuple[float, ...], ...]


def resampling_units(rows: pd.DataFrame, column: str) -> Units:
    """A side's values, one tuple per series where two or more series have values, else one per shot
    (in job and shot id order, so the draw does not depend on the rows' order)."""
    present = rows[rows[column].notna()]
    shots = sorted(zip(present["job_id"], present["shot_id"], present[column].astype(float), strict=True))
    series: dict[str, list[float]] = {}
    for job_id, _shot_id, value in shots:
        series.setdefault(job_id, []).append(value)
    if len(series) >= MIN_UNITS:
        return tuple(tuple(values) for values in series.values())
    return tuple((value,) for _job, _shot, value in shots)


def _resampled(units: Units, statistic: str, rng: np.random.Generator) -> np.ndarray:
    """The side's statistic over RESAMPLES draws of its units with replacement."""
    picks = rng.integers(0, len(units), size=(RESAMPLES, len(units)))
    if statistic == "median_of_series_medians" or all(len(u) == 1 for u in units):
        medians = np.array([statistics.median(u) for u in units])
        return np.median(medians[picks], axis=1)
    return np.array([np.median(np.concatenate([units[i] for i in draw])) for draw in picks])


@lru_cache(maxsize=4096)
def bootstrap_ratio_interval(
    top: Units, bottom: Units, top_statistic: str, bottom_statistic: str, seed: int = SEED
) -> tuple[float, float] | None:
    """The LEVEL percentile interval of statistic(top) / statistic(bottom); None with too few units."""
    if len(top) < MIN_UNITS or len(bottom) < MIN_UNITS:
        return None
    if {top_statistic, bottom_statistic} - set(_STATISTICS):
        raise ValueError(f"unknown statistic: {top_statistic}, {bottom_statistic}")
    rng = np.random.default_rng(seed)
    numerators = _resampled(top, top_statistic, rng)
    denominators = _resampled(bottom, bottom_statistic, rng)
    ratios = numerators[denominators != 0] / denominators[denominators != 0]
    if not len(ratios):
        return None
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def _interval(rows: pd.DataFrame, columns: Sequence[str], params: Mapping[str, Any]) -> tuple | None:
    axis, side, reference = params["side_axis"], params["side"], params["reference"]
    units = [resampling_units(rows[rows[axis] == which], columns[0]) for which in (side, reference)]
    interval = bootstrap_ratio_interval(
        *units, params["statistics"][side], params["statistics"][reference], params.get("seed", SEED)
    )
    if interval is None:
        return None
    offset = 1.0 if params.get("less_one") else 0.0  # a delta (ratio - 1) rather than a ratio
    return interval[0] - offset, interval[1] - offset


def bootstrap_low(
    rows: pd.DataFrame, columns: Sequence[str], params: Mapping[str, Any], inputs=()
) -> float | None:
    """The low end of the bootstrap interval of side / reference (less 1 for a delta)."""
    interval = _interval(rows, columns, params)
    return None if interval is None else interval[0]


def bootstrap_high(
    rows: pd.DataFrame, columns: Sequence[str], params: Mapping[str, Any], inputs=()
) -> float | None:
    """The high end of the bootstrap interval of side / reference (less 1 for a delta)."""
    interval = _interval(rows, columns, params)
    return None if interval is None else interval[1]


def verdict_code(values: Sequence[float | None], params: Mapping[str, Any]) -> float | None:
    """(low, high) -> 1.0 beyond noise (the interval leaves out params['null']), 0.0 within, None: too
    few shots to tell."""
    low, high = values
    if low is None or high is None:
        return None
    return 0.0 if low <= params["null"] <= high else 1.0


def verdict_words(code: float | None) -> str:
    """A verdict figure's value in words."""
    return TOO_FEW if code is None or code != code else VERDICT_CODES[float(code)]
