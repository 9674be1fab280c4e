"""The one statistic: which shots of a cell a figure uses, and how they are named.

Every figure of a cell selects its shots here. Cold: shot 1 of each fresh process. Warm: in each
series, the longest run of consecutive ok shots of one process (shot index rising by one), and of
that run the last `fraction` (the median of those is the series' value), never a process's shot 1
(its cold shot), whatever the fraction. A series without two such shots gives no warm value; a run
shorter than its series is used and said. The selected rows are exactly the shots a figure's value
is computed from and the shots it cites.
"""

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from whichshot.figures.cells import series_of

ROBUST_Z_THRESHOLD = 3.5
# Below five values the median absolute deviation is too unstable to call anything an outlier.
MIN_VALUES_FOR_OUTLIERS = 5
_MAD_TO_SIGMA = 0.6745
EVERY_SHOT = "every ok shot, cold and warm"  # how EveryShotRule's label begins
# The selected_by of hand-made selections (a rule's is its name): every shot of any status (a count of
# ok shots).
ANY_STATUS = "every shot, ok or not"
JOIN = " and "  # between the rules of a figure built on others (no rule's name holds it)
COLD_SHOT_INDEX = 1  # a process's first request: the cold shot, never a warm one


@dataclass(frozen=True)
class Selection:
    """The shots a figure uses, why these, and what kept others out."""

    rows: pd.DataFrame  # the shots used, every one with a value in the column asked for
    examined: pd.DataFrame  # the cell's shots the rule looked at (every status)
    label: str  # which shot, in words: the protocol, the shot indices used, the series
    shot_indices: str  # e.g. "3-6" or "1 (of each fresh process)"
    selected_by: str  # the rule that picked the shots, by name: "cold", "warm", "shot index", ...
    problems: tuple[str, ...] = field(default_factory=tuple)  # series the rule could not use, and why


def ok_rows(shots: pd.DataFrame, column: str | None = None) -> pd.DataFrame:
    """The ok shots, with a value in `column` if one is given."""
    rows = shots[shots["status"] == "ok"]
    return rows if column is None else rows[rows[column].notna()]


@dataclass(frozen=True)
class ColdRule:
    """Shot 1 of each fresh process."""

    name: str = "cold"

    def select(self, cell: pd.DataFrame, column: str | None) -> Selection:
        firsts = ok_rows(cell, column)
        firsts = firsts[firsts["shot_index"] == COLD_SHOT_INDEX]
        label = f"cold: shot 1 of {_count(len(firsts), 'fresh process', 'fresh processes')}"
        return Selection(firsts, cell, label, "1 (of each fresh process)", self.name)


@dataclass(frozen=True)
class WarmRule:
    """The last `fraction` of each series' longest run of consecutive ok shots of one process, less
    the process's shot 1."""

    fraction: float = 0.7
    name: str = "warm"

    def keep(self, n_shots: int) -> int:
        """How many of a run's last shots the rule keeps (at least one)."""
        return max(1, math.floor(self.fraction * n_shots + 0.5))

    def select(self, cell: pd.DataFrame, column: str | None) -> Selection:
        used, described, problems = [], [], []
        cold_left_out = False
        for job_id, series in series_of(cell):
            run = longest_run(series)
            if len(run) < 2:
                problems.append(f"{job_id}: no two consecutive ok shots of one process")
                continue
            if len(run) < len(series):
                problems.append(f"{job_id}: used {len(run)} consecutive ok shots of {len(series)}")
            tail = run.iloc[len(run) - self.keep(len(run)) :]
            tail = tail if column is None else tail[tail[column].notna()]
            kept = tail[tail["shot_index"] != COLD_SHOT_INDEX]
            cold_left_out |= len(kept) < len(tail)
            if kept.empty:
                if len(tail):
                    problems.append(
                        f"{job_id}: only shot 1 of its process has a value, and that is the cold shot"
                    )
                continue
            used.append(kept)
            described.append(f"shots {index_ranges(kept['shot_index'])} of {len(run)}")
        rows = pd.concat(used) if used else cell.iloc[0:0]
        label = self._label(described, cold_left_out)
        return Selection(rows, cell, label, _indices(rows), self.name, tuple(problems))

    def _label(self, described: list[str], cold_left_out: bool) -> str:
        if not described:
            return "warm: no series had two consecutive ok shots of one process"
        runs = "; ".join(dict.fromkeys(described))
        series = _count(len(described), "series", "series")
        share = f"the last {self.fraction:.0%}" + (
            ", less the process's cold shot 1" if cold_left_out else ""
        )
        return f"warm: {runs} consecutive ok shots of one process ({share}), {series}"


@dataclass(frozen=True)
class ShotIndexRule:
    """Shot index k of each series' longest run (a point of the speed-by-shot-index curve)."""

    shot_index: int
    name: str = "shot index"

    def select(self, cell: pd.DataFrame, column: str | None) -> Selection:
        used = []
        for _job, series in series_of(cell):
            run = longest_run(series)
            at = run[run["shot_index"] == self.shot_index]
            used.append(at if column is None else at[at[column].notna()])
        rows = pd.concat(used) if used else cell.iloc[0:0]
        label = (
            f"{cell['protocol'].iloc[0]}: shot {self.shot_index} of one process (consecutive ok "
            f"shots), {_count(len(rows), 'series', 'series')}"
        )
        return Selection(rows, cell, label, str(self.shot_index), self.name)


@dataclass(frozen=True)
class EveryShotRule:
    """Every ok shot, cold and warm alike (per-shot comparisons of two timers or two engines)."""

    name: str = "every shot"

    def select(self, cell: pd.DataFrame, column: str | None) -> Selection:
        rows = ok_rows(cell, column)
        label = f"{EVERY_SHOT} ({_count(len(rows), 'shot', 'shots')})"
        return Selection(rows, cell, label, index_ranges(rows["shot_index"]) if len(rows) else "", self.name)


Rule = ColdRule | WarmRule | ShotIndexRule | EveryShotRule


def protocol_rule(protocol: str, warm_fraction: float) -> ColdRule | WarmRule:
    """The rule a cell of this protocol is summarised by."""
    return ColdRule() if protocol == "cold" else WarmRule(warm_fraction)


def joined(selected_by: Iterable[str]) -> str:
    """The selected_by of a figure built on others: each rule of theirs once, in order ("warm and cold",
    not "warm and cold and warm" for warm against a cold-and-warm ratio)."""
    return JOIN.join(dict.fromkeys(rule for each in selected_by for rule in each.split(JOIN)))


def longest_run(series: pd.DataFrame) -> pd.DataFrame:
    """The longest run of ok shots served one after another by one process (earliest on a tie).
    A failed shot, a new process (engine death, resume) or a gap in shot index ends a run; the
    replay a shot made of itself (extra_requests: its ids recovered by asking again) is part of
    that shot, not a gap."""
    best: list[int] = []
    current: list[int] = []
    previous: tuple | None = None
    extras = (
        series["extra_requests"].fillna(0).astype(int) if "extra_requests" in series else [0] * len(series)
    )
    columns = zip(series["status"], series["process_id"], series["shot_index"], extras, strict=True)
    for position, (status, process, index, extra) in enumerate(columns):
        if status != "ok":
            current, previous = [], None
            continue
        follows = previous is not None and process == previous[0] and index == previous[1] + 1
        current = [*current, position] if follows else [position]
        previous = (process, index + extra)
        if len(current) > len(best):
            best = current
    return series.iloc[best]


def index_ranges(indices) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'."""
    ranges: list[list[int]] = []
    for index in sorted({int(i) for i in indices}):
        if ranges and index == ranges[-1][1] + 1:
            ranges[-1][1] = index
        else:
            ranges.append([index, index])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def _indices(rows: pd.DataFrame) -> str:
    return index_ranges(rows["shot_index"]) if len(rows) else ""


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def robust_z_scores(values: list[float]) -> list[float | None]:
    """0.6745 (x - median) / MAD; None for all when MAD is zero or there are too few values."""
    if len(values) < MIN_VALUES_FOR_OUTLIERS:
        return [None] * len(values)
    center = statistics.median(values)
    mad = statistics.median(abs(v - center) for v in values)
    if mad == 0:
        return [None] * len(values)
    return [_MAD_TO_SIGMA * (v - center) / mad for v in values]


def outlier_flags(values: list[float], threshold: float = ROBUST_Z_THRESHOLD) -> list[bool]:
    """True where |robust z| exceeds the threshold."""
    return [z is not None and abs(z) > threshold for z in robust_z_scores(values)]
