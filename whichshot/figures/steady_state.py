"""Did a warm series reach a steady state? Each series (one engine process) is classified from its
warm shots (shot 2 on, in shot order) by a trend suited to a handful of shots: the Theil-Sen slope
of log speed against shot index (the median of the slopes between every two shots, which one wild
shot moves little), written as the drift over the shots it spans.

- "flat": the drift over every warm shot lies within the margin;
- "warm-up" / "slowdown": it rises / falls beyond the margin, and the shots the warm rule keeps (the
  series' last ones) drift within it: the series settled after warming up or slowing down;
- "no steady state": the kept shots themselves drift beyond the margin;
- "too few shots": fewer than three warm shots (two points always lie on a line).
The margin is the verdicts' (protocol.verdict_margin). With three or four warm shots the kept shots
are most of them, so a short series is flat or has no steady state; warm-up and slowdown show in
longer series. The classification is counted beside the answer; it selects no shot.
"""

import itertools
import math
from collections.abc import Sequence

import pandas as pd

FLAT, WARM_UP, SLOWDOWN, NO_STEADY = "flat", "warm-up", "slowdown", "no steady state"
TOO_FEW_SHOTS = "too few shots"
CLASSES = (FLAT, WARM_UP, SLOWDOWN, NO_STEADY)  # the classes counted (too few shots is not a class)
MIN_SHOTS = 3
METHOD = (
    "each warm series' warm shots (shot 2 on): the Theil-Sen drift of log speed over them (the median "
    "slope between every two shots, times the shots spanned); flat: within the margin; warm-up/slowdown: "
    "rising/falling beyond it while the shots the warm rule keeps drift within it; no steady state: the "
    f"kept shots drift beyond it; fewer than {MIN_SHOTS} warm shots: not classified"
)


def drift(values: Sequence[float]) -> float:
    """The Theil-Sen drift of log values over their span (values in shot order, all > 0)."""
    logs = [math.log(v) for v in values]
    slopes = sorted((logs[j] - logs[i]) / (j - i) for i, j in itertools.combinations(range(len(logs)), 2))
    middle = len(slopes) // 2
    slope = slopes[middle] if len(slopes) % 2 else (slopes[middle - 1] + slopes[middle]) / 2
    return slope * (len(logs) - 1)


def classify(values: Sequence[float], kept: int, margin: float) -> str:
    """One series' class from its warm shots' speeds (shot order) and how many of its last the warm
    rule keeps. The speed is higher-is-better: a rising speed is a warm-up."""
    if len(values) < MIN_SHOTS or min(values) <= 0:
        return TOO_FEW_SHOTS
    band = math.log1p(margin)
    tail = values[len(values) - kept :] if kept >= 2 else []
    if len(tail) >= 2 and abs(drift(tail)) > band:
        return NO_STEADY
    overall = drift(values)
    if abs(overall) <= band:
        return FLAT
    if len(tail) < 2 or len(tail) == len(values):
        return NO_STEADY  # it moved, and no shorter kept tail says where it settled
    return WARM_UP if overall > 0 else SLOWDOWN


def series_classes(rows: pd.DataFrame, column: str, keep_of, margin: float) -> dict[str, str]:
    """process id -> class, from one cell's warm shots (shot 2 on) with a value in `column`; keep_of
    maps a run of n shots to how many of its last the warm rule keeps."""
    found = {}
    for process, shots in rows[rows[column].notna()].groupby("process_id", sort=True):
        shots = shots.sort_values("shot_index")
        values = [float(v) for v in shots[column]]
        kept = min(keep_of(len(values) + 1), len(values))  # the run holds shot 1 too, never kept
        found[str(process)] = classify(values, kept, margin)
    return found
