"""The caveat record: a caveat that fired, with what it says and which shots (or other inputs) it is
about, and the helpers rules build one with. Any stage may write a rule (an engine kind writes its
own); whichshot.figures.caveats.finding joins the findings to the figures."""

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import pandas as pd

from whichshot.tables import record_schema


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


# A rule over the shots alone (an engine kind's own): the shots table -> a Finding, or None.
ShotsRule = Callable[[pd.DataFrame], Finding | None]


def ids(rows: pd.DataFrame) -> frozenset[str]:
    return frozenset(rows["shot_id"])


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
