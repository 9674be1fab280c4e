"""One axis's sides set against each other: the same cell (every other axis equal) on each side of
the run (an engine, a node of a node comparison), against the run's first side (config order). Each
side's own speeds are its cells' figures; here only what compares two sides: speed ratios and the
share of shots whose output tokens are the same."""

from collections.abc import Callable
from dataclasses import dataclass

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import Cell, group_cells, shots_in
from whichshot.figures.statistic import EveryShotRule

# (the cells' figure, the ratio's metric after the side's prefix)
RATIOS = (("decode_tok_s", "decode_ratio"), ("prefill_tok_s", "prefill_ratio"))
SAME_OUTPUT = "same_output_share"


@dataclass(frozen=True)
class Side:
    """An axis whose values are compared side by side, and the prefix of its comparisons' metrics."""

    axis: str
    noun: str  # a side in words: "engine", "node"
    prefix: str  # xengine_decode_ratio, xnode_prefill_ratio, ...
    computed_by: Callable

    def metric(self, name: str) -> str:
        return f"{self.prefix}_{name}"


def reference_side(catalog: Catalog, axis: str) -> str | None:
    """The side every other is compared with: the run's first (None with fewer than two)."""
    sides = list(dict.fromkeys(catalog.shots[axis].dropna()))
    return sides[0] if len(sides) > 1 else None


def side_figures(catalog: Catalog, side: Side) -> list[figure.Figure]:
    reference = reference_side(catalog, side.axis)
    if reference is None:
        return []
    figures = []
    for cell, _rows in group_cells(catalog.shots):
        theirs = {**cell, side.axis: reference}
        if cell[side.axis] in (reference, None) or catalog.find(theirs, "shots_ok") is None:
            continue
        figures += _ratios(catalog, side, cell, theirs) + _same_output(catalog, side, cell, theirs)
    return figures


def _ratios(catalog: Catalog, side: Side, cell: Cell, theirs: Cell) -> list[figure.Figure]:
    ours_name, their_name = cell[side.axis], theirs[side.axis]
    figures = []
    for column, name in RATIOS:
        ours_figure, their_figure = catalog.find(cell, column), catalog.find(theirs, column)
        if ours_figure is None or their_figure is None:
            continue
        figures.append(
            figure.from_figures(
                side.metric(name),
                [ours_figure, their_figure],
                "ratio",
                unit="ratio",
                baseline=theirs,
                computed_by=side.computed_by,
                note=f"vs {their_name}",
                formula=f"{column} of {ours_name} / {column} of {their_name}, same cell otherwise",
            )
        )
    return figures


def _same_output(catalog: Catalog, side: Side, cell: Cell, theirs: Cell) -> list[figure.Figure]:
    axis = side.axis
    both = shots_in(catalog.shots, {k: v for k, v in cell.items() if k != axis})
    both = both[both[axis].isin([cell[axis], theirs[axis]])]
    selection = EveryShotRule().select(both, "output_sha256")
    if selection.rows[axis].nunique() < 2:
        return []
    params = {"side_axis": axis, "side": cell[axis], "reference": theirs[axis]}
    return [
        figure.from_shots(
            side.metric(SAME_OUTPUT),
            cell,
            selection,
            "paired_share_equal",
            ["output_sha256", "prompt_sha256"],
            unit="fraction",
            parameters=params,
            baseline=theirs,
            computed_by=side.computed_by,
            note=f"vs {theirs[axis]}",
            formula=f"share of shot pairs (same repeat and series position) whose output token ids equal "
            f"{theirs[axis]}'s, among pairs given the same prompt token ids",
        )
    ]
