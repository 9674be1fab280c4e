"""Grid cells as columns. Every grid axis is a typed shot column (whichshot.shots.axes); a cell
is the group of shots that share all of them, and its series are its jobs (one per repeat). Nothing
here, or downstream, takes a job id or label apart."""

import math
from collections.abc import Iterator
from typing import Any

import pandas as pd

from whichshot.shots.axes import AXES, AXIS, FRESH_PROCESS

Cell = dict[str, Any]  # axis -> value; a figure above one cell leaves the axes it spans out
# The pools of every shot of an engine and model (the best clock, client against engine): one per
# node where the run compares nodes, so that no pool sets one node's shots against another's.
ENGINE_MODEL = ("engine", "model", "node_requested")


def clean(axis: str, value: Any) -> Any:
    """An axis value as plain Python (NaN and pandas NA -> None, integral axes -> int)."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    if AXIS[axis].type in (int, float):
        return AXIS[axis].type(value)
    return value.item() if hasattr(value, "item") else value


def cell_of(row: dict[str, Any] | pd.Series, axes: tuple[str, ...] = AXES) -> Cell:
    """The cell a shot row belongs to (or its part over `axes`)."""
    return {axis: clean(axis, row[axis]) for axis in axes}


def group_cells(shots: pd.DataFrame, axes: tuple[str, ...] = AXES) -> Iterator[tuple[Cell, pd.DataFrame]]:
    """(cell, its shots) for every cell, in the order the shots first appear (config order)."""
    if shots.empty:
        return
    for _key, rows in shots.groupby(list(axes), sort=False, dropna=False):
        yield cell_of(rows.iloc[0], axes), rows


def shots_in(shots: pd.DataFrame, cell: Cell) -> pd.DataFrame:
    """The shots of a cell (or of every cell matching a partial one)."""
    mask = pd.Series(True, index=shots.index)
    for axis, value in cell.items():
        column = shots[axis].map(lambda v, a=axis: clean(a, v))
        mask &= column.isna() if value is None else column == value
    return shots[mask]


def cold_sibling(warm: Cell) -> Cell:
    """The cold cell a warm cell is compared with: the same cell, shot 1 of fresh processes (no rest,
    no warm-up before it)."""
    return {**warm, **FRESH_PROCESS}


def cell_id(cell: Cell) -> str:
    """A readable, unique id: the axis values in AXES order ('/'-joined). Axes the cell leaves out, or
    has no value for (a workload of fixed text has no prompt length), are skipped, and so are the
    load axes at their defaults: ids from before those axes existed stay as they were."""
    named = [axis for axis in AXES if cell.get(axis) not in (None, AXIS[axis].unnamed)]
    return "/".join(_part(axis, cell[axis]) for axis in named)


def _part(axis: str, value: Any) -> str:
    if AXIS[axis].type is float:
        return f"{AXIS[axis].prefix}{value:g}s"  # seconds: rest0.5s
    return f"{AXIS[axis].prefix}{value}"


def series_of(shots: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """(job id, its shots in series order) for each series of a cell."""
    for job_id, rows in shots.groupby("job_id", sort=False):
        yield job_id, rows.sort_values("series_position")
