"""The one provenance rule. A figure's kind follows from how it was computed, never from the
family that made it:

- one shot's value, read by our clock or a sensor: measured; one value the engine (or another
  tool) printed about itself: engine-reported (the column's own kind, from shots.schema.yaml);
- any arithmetic on such values (a rate, a median or share over shots, a ratio of summed
  counts, a ratio of two figures): derived;
- a value that rests on a model of the system (a prediction, a ceiling), or arithmetic on one or
  on a constant of ours: inferred;
- a constant we chose: assumed.
"""

from collections.abc import Sequence
from functools import cache

from whichshot.figures.aggregations import AGGREGATIONS
from whichshot.tables import record_schema

KINDS = ("measured", "engine-reported", "derived", "inferred", "assumed")


@cache
def column_kinds() -> dict[str, str]:
    """Provenance kind of each shot value column (x-kind in shots.schema.yaml)."""
    properties = record_schema("shots")["properties"]
    return {name: prop["x-kind"] for name, prop in properties.items() if "x-kind" in prop}


def kind_of(aggregation: str, columns: Sequence[str], n_shots: int, input_kinds: Sequence[str] = ()) -> str:
    """The provenance kind of a figure computed by `aggregation`."""
    how = AGGREGATIONS[aggregation]
    if how.inputs == "constant":
        return "assumed"
    if how.measured_by_us:
        return "measured"
    if how.rests_on_a_model or {"inferred", "assumed"} & set(input_kinds):
        return "inferred"
    if how.inputs == "source":  # one value the tool printed, or arithmetic on several
        return "engine-reported" if how.picks_one_value else "derived"
    if how.picks_one_value and n_shots == 1 and len(columns) == 1:
        return column_kinds().get(columns[0], "derived")
    return "derived"
