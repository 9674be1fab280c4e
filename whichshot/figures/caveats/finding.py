"""A caveat is a predicate over shots (or over cells: all their shots). It fires with the ids of the
shots (or other sources) it is about, and attaches to every figure that cites one of them, within
its scope: only figures that read one of its columns (and none it spares), or only figures that
compare cells differing in one axis. No figure family picks its caveats; `attach` is the one place
they are joined."""

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import pandas as pd

from whichshot.figures.cells import group_cells
from whichshot.figures.figure import Figure
from whichshot.shots.axes import AXES
from whichshot.tables import record_schema

# Shot columns besides the grid's axes that a caveat may be scoped across: the machine a shot ran on.
ACROSS_COLUMNS = ("hostname",)


@dataclass(frozen=True)
class Finding:
    """A caveat that fired: what it says and which inputs it is about."""

    caveat_id: str
    sentence: str
    shot_ids: frozenset[str] = frozenset()
    source_ids: frozenset[str] = frozenset()  # inputs that are not shots (a llama-bench output)
    columns: frozenset[str] | None = None  # only figures reading one of these shot columns (or a source)
    across: str | None = None  # only figures whose cited shots differ in this axis
    spares: frozenset[str] = frozenset()  # not figures reading one of these (they account for it)

    def touches(self, figure: Figure, axes_of: pd.DataFrame) -> bool:
        if not (
            self.shot_ids.intersection(figure.shot_ids) or self.source_ids.intersection(figure.source_ids)
        ):
            return False
        reads_none = not self.columns.intersection(figure.reads) if self.columns is not None else False
        if reads_none and not self.source_ids.intersection(figure.source_ids):
            return False
        if self.spares.intersection(figure.reads):
            return False
        if self.across is not None:
            return axes_of.loc[figure.shot_ids, self.across].nunique(dropna=False) > 1
        return True

    def as_row(self, figure_ids: list[str]) -> dict:
        return {
            "caveat_id": self.caveat_id,
            "sentence": self.sentence,
            "figure_ids": figure_ids,
            "shot_ids": sorted(self.shot_ids),
            "source_ids": sorted(self.source_ids),
            "columns": sorted(self.columns) if self.columns is not None else [],
            "across": self.across or "",
            "spares": sorted(self.spares),
        }


def attach(findings: Iterable[Finding], figures: list[Figure], shots: pd.DataFrame) -> list[dict]:
    """Add each finding's id to the figures it touches; the caveat rows, with those figures' ids.

    Every shot is cited by its cell's shots_ok figure, so a caveat about shots always touches one.
    A scoped caveat (some columns, or comparisons across an axis) whose scope holds no figure of this
    run concerns no number shown: it does not fire."""
    axes_of = shots.set_index("shot_id")[[*AXES, *ACROSS_COLUMNS]]
    rows = []
    for finding in findings:
        touched = [f for f in figures if finding.touches(f, axes_of)]
        if not touched and (finding.columns is not None or finding.across is not None):
            continue
        for figure in touched:
            figure.caveat_ids.append(finding.caveat_id)
        rows.append(finding.as_row([f.figure_id for f in touched]))
    return rows


def compared_across(figures: list[Figure], shots: pd.DataFrame, axis: str) -> frozenset[str]:
    """Shots cited by a figure that compares cells differing in `axis` (what an `across` caveat can
    reach: a rule about a comparison fires only where some figure makes it)."""
    values = shots.set_index("shot_id")[axis]
    found: set[str] = set()
    for figure in figures:
        if figure.shot_ids and values.loc[figure.shot_ids].nunique(dropna=False) > 1:
            found.update(figure.shot_ids)
    return frozenset(found)


def ids(rows: pd.DataFrame) -> frozenset[str]:
    return frozenset(rows["shot_id"])


def whole_cells(shots: pd.DataFrame, affected: pd.Series) -> frozenset[str]:
    """Every shot of each cell that holds an affected shot (a predicate over cells)."""
    found: set[str] = set()
    for _cell, rows in group_cells(shots):
        if affected.loc[rows.index].any():
            found.update(rows["shot_id"])
    return frozenset(found)


@cache
def columns_from(*sources: str) -> frozenset[str]:
    """Shot columns whose values come from these sources (x-source in shots.schema.yaml)."""
    properties = record_schema("shots")["properties"]
    return frozenset(n for n, p in properties.items() if p.get("x-source") in sources)


def flag(values: pd.Series) -> pd.Series:
    """Rows whose boolean column is exactly true (missing is not)."""
    return values.map(lambda v: v is not None and not pd.isna(v) and bool(v)).astype(bool)


def flag_false(values: pd.Series) -> pd.Series:
    """Rows whose boolean column is exactly false (missing is not)."""
    return values.map(lambda v: v is not None and not pd.isna(v) and not bool(v)).astype(bool)
