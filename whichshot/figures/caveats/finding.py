"""A caveat is a predicate over shots (or over cells: all their shots). It fires with the ids of the
shots (or other sources) it is about, and attaches to every figure that cites one of them, within
its scope: only figures that read one of its columns (and none it spares), or only figures that
compare cells differing in one axis. No figure family picks its caveats; `attach` is the one place
they are joined. The caveat record, Finding, lives on the ground floor (whichshot.shots.caveat),
where an engine kind's own rules reach it too."""

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from whichshot.figures.cells import group_cells
from whichshot.figures.figure import Figure
from whichshot.shots.axes import AXES
from whichshot.shots.caveat import Finding

# Shot columns besides the grid's axes that a caveat may be scoped across: the machine a shot ran on.
ACROSS_COLUMNS = ("hostname",)


# column -> {shot_id: value}: a figure's shots compared by plain lookups (pandas indexing per figure
# cost most of a derivation's time).
ShotValues = Mapping[str, Mapping[str, Any]]


def shot_values(shots: pd.DataFrame, columns: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Each column's value per shot id (NaN and None alike: one missing value)."""
    ids = shots["shot_id"].tolist()
    return {c: dict(zip(ids, shots[c].astype(object).where(shots[c].notna(), None), strict=True))
            for c in columns}  # fmt: skip


def _differ(values: Mapping[str, Any], shot_ids: Iterable[str]) -> bool:
    """Whether the shots hold more than one value (a missing value counts as one)."""
    return len({values[s] for s in shot_ids}) > 1


def touches(finding: Finding, figure: Figure, axes_of: ShotValues) -> bool:
    """Whether the finding is about an input the figure cites, within the finding's scope."""
    if not (
        finding.shot_ids.intersection(figure.shot_ids) or finding.source_ids.intersection(figure.source_ids)
    ):
        return False
    reads_none = not finding.columns.intersection(figure.reads) if finding.columns is not None else False
    if reads_none and not finding.source_ids.intersection(figure.source_ids):
        return False
    if finding.spares.intersection(figure.reads):
        return False
    if finding.across is not None:
        return _differ(axes_of[finding.across], figure.shot_ids)
    return True


def attach(findings: Iterable[Finding], figures: list[Figure], shots: pd.DataFrame) -> list[dict]:
    """Add each finding's id to the figures it touches; the caveat rows, with those figures' ids.

    Every shot is cited by its cell's shots_ok figure, so a caveat about shots always touches one.
    A scoped caveat (some columns, or comparisons across an axis) whose scope holds no figure of this
    run concerns no number shown: it does not fire."""
    axes_of = shot_values(shots, [*AXES, *ACROSS_COLUMNS])
    rows = []
    for finding in findings:
        touched = [f for f in figures if touches(finding, f, axes_of)]
        if not touched and (finding.columns is not None or finding.across is not None):
            continue
        for figure in touched:
            figure.caveat_ids.append(finding.caveat_id)
        rows.append(finding.as_row([f.figure_id for f in touched]))
    return rows


def compared_across(figures: list[Figure], shots: pd.DataFrame, axis: str) -> frozenset[str]:
    """Shots cited by a figure that compares cells differing in `axis` (what an `across` caveat can
    reach: a rule about a comparison fires only where some figure makes it)."""
    values = shot_values(shots, [axis])[axis]
    found: set[str] = set()
    for figure in figures:
        if _differ(values, figure.shot_ids):
            found.update(figure.shot_ids)
    return frozenset(found)


def whole_cells(shots: pd.DataFrame, affected: pd.Series) -> frozenset[str]:
    """Every shot of each cell that holds an affected shot (a predicate over cells)."""
    found: set[str] = set()
    for _cell, rows in group_cells(shots):
        if affected.loc[rows.index].any():
            found.update(rows["shot_id"])
    return frozenset(found)
