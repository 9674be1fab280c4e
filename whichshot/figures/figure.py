"""The figure row and the only ways to make one. A figure computed from shots takes its value from
the aggregation over exactly the selected rows and cites exactly those rows; a figure computed from
figures cites their shots; the provenance kind comes from provenance.kind_of. No family sets a
value, a kind or a citation by hand."""

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any

from whichshot.figures.aggregations import compute
from whichshot.figures.cells import Cell, cell_id
from whichshot.figures.provenance import kind_of
from whichshot.figures.statistic import Selection, joined
from whichshot.shots.axes import AXES
from whichshot.tables import record_schema

# Whose clock or check a shot column comes from (x-source in shots.schema.yaml), in words.
_TIMED_BY = {
    "client": "whichshot client",
    "engine": "engine",
    "telemetry": "telemetry",
    "host": "host counters (psutil)",
    "output": "checks on the output",
    "prompt": "checks on the prompt",
}
SOURCE = "source"  # the selected_by of a figure that cites no shots: another tool's number, a constant


@dataclass
class Figure:
    """One number of the report, with everything needed to recompute and qualify it."""

    figure_id: str
    metric: str
    value: float | None
    unit: str
    kind: str
    aggregation: str
    columns: list[str]  # shot columns the aggregation reads
    reads: list[str]  # every shot column the value rests on, through input figures too
    parameters: str  # JSON: the aggregation's settings (thresholds, sides)
    shot_ids: list[str]  # exactly the shots the value was computed from (or, without a value, examined)
    source_ids: list[str]  # inputs that are not shots (another tool's output, a constant of ours)
    input_figure_ids: list[str]  # figures this one is arithmetic on
    cell_id: str  # the cell (or part of the grid) the figure is about
    baseline_cell_id: str  # the cell it is compared with ("" if none)
    axes: dict[str, Any]  # the cell's axis values (each its own column in figures.parquet)
    shot_index: int | None  # set for a point of a by-shot-index curve
    shot_indices: str
    which_shot: str
    selected_by: str  # the rule that picked its shots (statistic.Selection), its inputs' joined, or SOURCE
    formula: str
    computed_by: str  # module.function that built the figure: the one hop from a number to its code
    timed_by: str
    note: str = ""
    caveat_ids: list[str] = field(default_factory=list)

    def as_row(self) -> dict[str, Any]:
        row = asdict(self)
        axes = row.pop("axes")
        return {**row, **{axis: axes.get(axis) for axis in AXES}}


def from_shots(
    metric: str,
    cell: Cell,
    selection: Selection,
    aggregation: str,
    columns: Sequence[str],
    *,
    formula: str,
    computed_by: Callable,
    unit: str | None = None,
    parameters: dict[str, Any] | None = None,
    inputs: Sequence[Figure] = (),
    baseline: Cell | None = None,
    shot_index: int | None = None,
    note: str = "",
) -> Figure:
    """A figure whose value is `aggregation` over the selected rows (and input figures' values)."""
    rows = selection.rows if len(selection.rows) else selection.examined
    value = compute(aggregation, selection.rows, columns, parameters or {}, [f.value for f in inputs])
    cited = (selection.rows if value is not None else rows)["shot_id"].tolist()
    return Figure(
        figure_id=_figure_id(cell, metric, shot_index),
        metric=metric,
        value=_plain(value),
        unit=unit or column_unit(columns[0]),
        kind=kind_of(aggregation, columns, len(selection.rows), [f.kind for f in inputs]),
        aggregation=aggregation,
        columns=list(columns),
        reads=_union([list(columns), *(f.reads for f in inputs)]),
        parameters=json.dumps(parameters or {}, sort_keys=True),
        shot_ids=cited,
        source_ids=_union([f.source_ids for f in inputs]),
        input_figure_ids=[f.figure_id for f in inputs],
        cell_id=cell_id(cell),
        baseline_cell_id=cell_id(baseline) if baseline else "",
        axes=dict(cell),
        shot_index=shot_index,
        shot_indices=selection.shot_indices if value is not None else "",
        which_shot=f"{selection.label}; timed by {timed_by(columns)}",
        selected_by=selection.selected_by,
        formula=formula,
        computed_by=_qualified(computed_by),
        timed_by=timed_by(columns),
        note=note,
    )


def from_figures(
    metric: str,
    inputs: Sequence[Figure],
    aggregation: str,
    *,
    unit: str,
    formula: str,
    computed_by: Callable,
    cell: Cell | None = None,
    baseline: Cell | None = None,
    parameters: dict[str, Any] | None = None,
    note: str = "",
) -> Figure:
    """A figure that is arithmetic on other figures; it cites every shot they cite."""
    subject = inputs[0]
    cell = dict(subject.axes) if cell is None else cell
    value = compute(aggregation, None, [], parameters or {}, [f.value for f in inputs])
    labels = list(dict.fromkeys(f.which_shot for f in inputs))
    return Figure(
        figure_id=_figure_id(cell, metric, subject.shot_index),
        metric=metric,
        value=_plain(value),
        unit=unit,
        kind=kind_of(aggregation, [], 0, [f.kind for f in inputs]),
        aggregation=aggregation,
        columns=[],
        reads=_union([f.reads for f in inputs]),
        parameters=json.dumps(parameters or {}, sort_keys=True),
        shot_ids=_union([f.shot_ids for f in inputs]),
        source_ids=_union([f.source_ids for f in inputs]),
        input_figure_ids=[f.figure_id for f in inputs],
        cell_id=cell_id(cell),
        baseline_cell_id=cell_id(baseline) if baseline else "",
        axes=cell,
        shot_index=subject.shot_index,
        shot_indices=subject.shot_indices,
        which_shot=" against ".join(labels),
        selected_by=joined(f.selected_by for f in inputs),
        formula=formula,
        computed_by=_qualified(computed_by),
        timed_by=" and ".join(dict.fromkeys(f.timed_by for f in inputs)),
        note=note,
    )


def given(
    metric: str,
    value: float,
    unit: str,
    aggregation: str,
    source_id: str,
    **described: Any,
) -> Figure:
    """A value taken as it is: another tool's number (reported_by_another_tool) or a constant of
    ours (constant). It cites its source, not shots."""
    return from_source(metric, aggregation, {"value": value}, [source_id], unit, **described)


def from_source(
    metric: str,
    aggregation: str,
    parameters: dict[str, Any],
    source_ids: Sequence[str],
    unit: str,
    *,
    cell: Cell,
    formula: str,
    computed_by: Callable,
    timed_by: str,
    which_shot: str,
    note: str = "",
) -> Figure:
    """A figure computed from what another tool printed (kept in parameters, so the value can be
    recomputed) or a constant; it cites its sources, not shots."""
    value = compute(aggregation, None, [], parameters)
    return Figure(
        figure_id=_figure_id(cell, metric, None),
        metric=metric,
        value=_plain(value),
        unit=unit,
        kind=kind_of(aggregation, [], 0),
        aggregation=aggregation,
        columns=[],
        reads=[],
        parameters=json.dumps(parameters, sort_keys=True),
        shot_ids=[],
        source_ids=list(source_ids),
        input_figure_ids=[],
        cell_id=cell_id(cell),
        baseline_cell_id="",
        axes=cell,
        shot_index=None,
        shot_indices="",
        which_shot=which_shot,
        selected_by=SOURCE,
        formula=formula,
        computed_by=_qualified(computed_by),
        timed_by=timed_by,
        note=note,
    )


@cache
def _columns() -> dict[str, dict[str, Any]]:
    return record_schema("shots")["properties"]


def column_unit(column: str) -> str:
    """A shot column's unit (x-unit in shots.schema.yaml)."""
    return str(_columns()[column].get("x-unit", ""))


def timed_by(columns: Sequence[str]) -> str:
    """Whose clocks or checks produced these columns, in words."""
    sources = [_columns()[c].get("x-source", "client") for c in columns if c in _columns()]
    return " and ".join(dict.fromkeys(_TIMED_BY[s] for s in sources)) or "whichshot"


def _figure_id(cell: Cell, metric: str, shot_index: int | None) -> str:
    head = cell_id(cell)
    tail = metric if shot_index is None else f"{metric}@shot{shot_index}"
    return f"{head}/{tail}" if head else tail


def _union(lists) -> list:
    return list(dict.fromkeys(item for items in lists for item in items))


def _plain(value):
    return None if value is None else float(value)


def _qualified(function: Callable) -> str:
    return f"{function.__module__}.{function.__qualname__}"
