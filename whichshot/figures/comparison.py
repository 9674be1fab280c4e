"""Two sides compared with the process as the unit (figures.verdict): the point (a ratio of the
processes' geometric means), its interval ends and its verdict; with too few processes on a side, no
interval, the verdict "too few processes to tell" and the range of the ratio over every pair of
processes instead. Unpaired (two cells: cold processes against warm series, a drafted cell against no
drafting) or paired inside each process (a warm series' shot 1 against its kept warm shots). One
function for the cold-vs-warm phases and the speed-ups."""

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.cells import Cell
from whichshot.figures.statistic import Selection, joined
from whichshot.figures.verdict import LEVEL, METHOD, PAIRED_METHOD, level_words, margin_words, verdict_words

VERDICT_UNIT = "verdict"  # 1 = differs, 0 = same within the margin, 0.5 = undecided, no value = too few


def interval_metrics(metric: str) -> tuple[str, str, str]:
    """The metrics of a comparison's interval ends and verdict."""
    return f"{metric}_low", f"{metric}_high", f"{metric}_verdict"


def range_metrics(metric: str) -> tuple[str, str]:
    """The metrics of the range shown where there are too few processes for an interval."""
    return f"{metric}_range_low", f"{metric}_range_high"


def comparison_metrics(metric: str) -> tuple[str, ...]:
    """Every metric a comparison makes: its point, interval ends, verdict and range."""
    return (metric, *interval_metrics(metric), *range_metrics(metric))


@dataclass(frozen=True)
class Pair:
    """`side` over `reference` in one shot column; the figures are about `about`, compared with
    `baseline` (the warm cell against its cold sibling, a drafted cell against no drafting). Paired:
    side and reference are one cell, its processes' shot 1 against their kept warm shots."""

    metric: str
    column: str
    side: Cell
    reference: Cell
    side_axis: str  # the axis in which the two cells differ
    less_one: bool  # a relative delta (ratio - 1), not a ratio
    about: Cell
    baseline: Cell | None  # None: paired inside the cell's own processes
    words: str  # the ratio in words, for the formulas
    paired: bool = False
    level: float = LEVEL  # the interval's level (a lower alpha per look where the grid runs until decided)

    @property
    def aggregation(self) -> str:
        """The aggregations' stem: per process paired, or each side's processes apart."""
        return "paired_ratio" if self.paired else "process_ratio"

    @property
    def method(self) -> str:
        return (PAIRED_METHOD if self.paired else METHOD) + level_words(self.level)

    @property
    def values_words(self) -> str:
        if self.paired:
            return "each process's shot 1 over the median of its kept warm shots"
        return "each side's per-process values (a process's value: the median of the shots its rule kept)"


def _maker(pair: Pair, selections: tuple[Selection, Selection], computed_by: Callable) -> Callable:
    """A function (metric, aggregation, formula) -> a figure over both sides' shots."""
    both = _joined(*selections)
    parameters = {"side_axis": pair.side_axis, "side": pair.side[pair.side_axis],
                  "reference": pair.reference[pair.side_axis], "less_one": pair.less_one}  # fmt: skip
    parameters |= {"paired": True} if pair.paired else {}
    parameters |= {"level": pair.level} if pair.level != LEVEL else {}
    unit = "fraction" if pair.less_one else "ratio"

    def from_both(metric: str, aggregation: str, formula: str) -> figure.Figure:
        return figure.from_shots(metric, pair.about, both, aggregation, [pair.column], unit=unit,
                                 parameters=parameters, baseline=pair.baseline, formula=formula,
                                 computed_by=computed_by)  # fmt: skip

    return from_both


def comparison_point(
    pair: Pair, selections: tuple[Selection, Selection], computed_by: Callable
) -> figure.Figure:
    """The point alone (a number shown beside another comparison's verdict, never a verdict)."""
    return _point(pair, _maker(pair, selections, computed_by))


def _point(pair: Pair, from_both: Callable) -> figure.Figure:
    return from_both(
        pair.metric,
        pair.aggregation,
        f"{pair.words}: the geometric mean over processes of {pair.values_words}"
        f"{' - 1' if pair.less_one else ''}",
    )


def comparison_figures(
    pair: Pair, selections: tuple[Selection, Selection], margin: float, computed_by: Callable
) -> list[figure.Figure]:
    """The point, its interval ends and verdict, and the range where the interval has no value."""
    from_both = _maker(pair, selections, computed_by)
    point = _point(pair, from_both)
    low_metric, high_metric, verdict_metric = interval_metrics(pair.metric)
    stem, method = pair.aggregation, pair.method
    ends = [
        from_both(low_metric, f"{stem}_low", f"low end of the interval of {pair.words}: {method}"),
        from_both(high_metric, f"{stem}_high", f"high end of the interval of {pair.words}: {method}"),
    ]
    verdict = figure.from_figures(
        verdict_metric,
        ends,
        "verdict",
        unit=VERDICT_UNIT,
        cell=pair.about,
        baseline=pair.baseline,
        parameters={"margin": margin, "less_one": pair.less_one},
        formula=f"1 = differs, 0 = same within {margin_words(margin)}, 0.5 = undecided, no value = too few "
        f"processes to tell: the interval of {pair.words}; {pair.method}",
        computed_by=computed_by,
    )
    verdict.note = verdict_words(verdict.value, margin)
    spread = [] if ends[0].value is not None else _range(pair, from_both)
    return [point, *ends, verdict, *spread]


def _range(pair: Pair, from_both: Callable[[str, str, str], figure.Figure]) -> list[figure.Figure]:
    """The lowest and highest ratio over every pair of processes (too few for an interval); paired,
    over the processes' own ratios."""
    low_metric, high_metric = range_metrics(pair.metric)
    over = "each process's own ratio" if pair.paired else "every pair of one process of each side"
    words = f"{pair.words} over {over} (too few processes for an interval)"
    return [
        from_both(low_metric, f"{pair.aggregation}_min", f"lowest {words}"),
        from_both(high_metric, f"{pair.aggregation}_max", f"highest {words}"),
    ]


def _joined(side: Selection, reference: Selection) -> Selection:
    """One selection of both sides' shots (the figures cite exactly these)."""
    return Selection(
        pd.concat([side.rows, reference.rows]),
        pd.concat([side.examined, reference.examined]),
        f"{side.label} against {reference.label}",
        f"{side.shot_indices} against {reference.shot_indices}",
        joined([side.selected_by, reference.selected_by]),
    )
