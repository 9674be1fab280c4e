"""The report's tables as plain rows, built from figures.parquet only (report.layout describes how
each is shown, in HTML and Markdown alike). Rows are cells, read from the figures' axis columns;
nothing here takes an id apart.

Every figure lands in at least one table; a metric no table knows (e.g. one a new figure family
adds) goes to "Other figures", so nothing in the figure table is left out of the report.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from whichshot.figures.cells import clean
from whichshot.figures.metrics import (
    CHECKS,
    DETAIL_COLUMNS,
    HEADLINE_COLUMNS,
    LOAD_COLUMNS,
    PER_SIDE,
    SECTIONS,
    SERIES_METRICS,
    SIDES,
    SPEEDUP_MODEL_COLUMNS,
    TRACE_MIX_COLUMNS,
    TRACE_REQUEST_COLUMNS,
    WORKLOAD_COLUMNS,
    places,
    vs_reference,
)
from whichshot.figures.side_figures import Side
from whichshot.figures.speedup_model_figures import PREDICTED_SPEEDUP
from whichshot.shots.axes import AXES, BASE_WORKLOAD, NO_DRAFT, TRACE_WORKLOAD

LOAD_AXES = ("prefill_chunk_tokens", "parallel_streams")
# Aggregations that are a cell's statistic under its protocol's rule (the row's which-shot words).
STATISTICS = ("median", "median_of_series_medians")


@dataclass
class Section:
    """A titled list of figure rows (the generic table layout)."""

    key: str
    title: str
    intro: str
    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SideTable:
    """Cells run on two or more sides of one axis (engines, compared nodes), side by side."""

    axis: str
    noun: str
    key: str
    title: str
    intro: str
    sides: list[str]
    vs_reference: tuple[tuple[str, str, str], ...]
    head_axis: str | None  # the other side axis, where rows differ in it (its own first column)
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reference(self) -> str:
        return self.sides[0]

    @property
    def others(self) -> list[str]:
        return [e for e in self.sides if e != self.reference]


@dataclass
class SeriesTable:
    """Warm cells shot by shot: one row per cell and metric, one column per shot index."""

    indices: list[int]
    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ReportTables:
    run: dict[str, Any] | None
    headline: list[dict[str, Any]]
    load: list[dict[str, Any]]
    workloads: list[dict[str, Any]]
    trace_mix: list[dict[str, Any]]
    trace_requests: list[dict[str, Any]]
    sides: list[SideTable]
    telemetry: list[dict[str, Any]]
    series: SeriesTable
    sections: list[Section]
    inferred: list[dict[str, Any]]
    shown_ids: set[str]
    speedup_model: list[dict[str, Any]] = field(default_factory=list)


def build_tables(figures: pd.DataFrame) -> ReportTables:
    """Split the figure table into the report's tables; every figure id is shown at least once."""
    records = records_of(figures)
    shown: set[str] = set()
    run = next((r for r in records if r["metric"] == "shots_ok" and not r["cell_id"]), None)
    if run:
        shown.add(run["figure_id"])
    per_cell = [r for r in records if r["shot_index"] is None and r["protocol"] is not None]
    base = [r for r in per_cell if r["workload"] == BASE_WORKLOAD]
    work = [r for r in per_cell if r["workload"] not in (BASE_WORKLOAD, TRACE_WORKLOAD)]
    traced = [r for r in per_cell if r["workload"] == TRACE_WORKLOAD]
    headline = cell_rows(base, HEADLINE_COLUMNS, shown)
    # The workload table has a protocol column: its which-shot words need not repeat it.
    workloads = cell_rows(work, WORKLOAD_COLUMNS + tuple((m, n, "") for m, n, _ in CHECKS), shown,
                          with_protocol=False)  # fmt: skip
    _order_workload_rows(workloads)
    trace_mix = cell_rows([r for r in traced if r["request_id"] is None], TRACE_MIX_COLUMNS, shown)
    trace_requests = cell_rows([r for r in traced if r["request_id"]], TRACE_REQUEST_COLUMNS, shown,
                               with_protocol=False)  # fmt: skip
    _order_workload_rows(trace_requests)
    sides = [t for t in (side_table(per_cell, shown, *side) for side in SIDES) if t is not None]
    modelled = {r["cell_id"] for r in per_cell if r["metric"] == PREDICTED_SPEEDUP}
    speedup_model = cell_rows([r for r in per_cell if r["cell_id"] in modelled], SPEEDUP_MODEL_COLUMNS, shown,
                              with_protocol=False)  # fmt: skip
    _order_workload_rows(speedup_model)
    load = cell_rows(_load_cells(base), LOAD_COLUMNS, shown)
    in_headline = {m for m, *_ in HEADLINE_COLUMNS}
    telemetry = cell_rows(
        [r for r in per_cell if r["workload"] != BASE_WORKLOAD or r["metric"] not in in_headline],
        DETAIL_COLUMNS,
        shown,
    )
    series = series_table(records, shown)
    sections = [_section(records, shown, key, title, intro, _lists(key)) for key, title, intro in SECTIONS]
    inferred = [r for r in records if r["kind"] == "inferred"]
    return ReportTables(run, headline, load, workloads, trace_mix, trace_requests, sides, telemetry,
                        series, [s for s in sections if s.rows], inferred, shown, speedup_model)  # fmt: skip


def _load_cells(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The protocol grid's figure rows, where the run has several prefill chunks or stream counts."""
    varied = [axis for axis in LOAD_AXES if len({r[axis] for r in records if r[axis] is not None}) > 1]
    return records if varied else []


def records_of(figures: pd.DataFrame) -> list[dict[str, Any]]:
    """Figure rows as plain dicts: lists as lists, missing numbers as None, every axis as plain
    Python (cells.clean)."""
    rows = figures.to_dict("records")
    for row in rows:
        for key in ("caveat_ids", "shot_ids", "source_ids", "input_figure_ids", "columns", "reads"):
            row[key] = list(row[key]) if row.get(key) is not None else []
        for key in ("value", "shot_index"):
            row[key] = None if pd.isna(row.get(key)) else row[key]
        row["shot_index"] = None if row["shot_index"] is None else int(row["shot_index"])
        for axis in AXES:
            row[axis] = clean(axis, row.get(axis))
    return rows


def cell_rows(
    records: Iterable[dict[str, Any]], columns, shown: set[str], with_protocol: bool = True
) -> list[dict[str, Any]]:
    """One row per cell (in figure order) holding the figures of these metrics."""
    wanted = {metric for metric, *_ in columns}
    rows: dict[str, dict[str, Any]] = {}
    for r in records:
        if r["metric"] not in wanted:
            continue
        row = rows.setdefault(r["cell_id"], row_head(r))
        row["cells"][r["metric"]] = r
        shown.add(r["figure_id"])
    return _with_which_shot(list(rows.values()), with_protocol)


def _with_which_shot(rows: list[dict[str, Any]], with_protocol: bool = True) -> list[dict[str, Any]]:
    """Each row's which-shot words, from its decode figure, else its first figure that is the
    cell's statistic (a count of shots, say, uses every shot and names no indices)."""
    for row in rows:
        figures = list(row["cells"].values())
        statistics = [f for f in figures if f["aggregation"] in STATISTICS] or figures
        lead = next((f for f in statistics if f["metric"] == "decode_tok_s"), statistics[0])
        row["which_shot"] = which_shot_short(lead, with_protocol)
    return rows


def row_head(r: dict[str, Any]) -> dict[str, Any]:
    """A cell's axis values, as a table row starts (engine_on: the engine and, in a node comparison,
    its node: the tables that list engines name the node there)."""
    return {
        **{axis: r[axis] for axis in AXES},
        "engine_on": f"{r['engine']} on {r['node_requested']}" if r["node_requested"] else r["engine"],
        "cell_id": r["cell_id"],
        "cells": {},
        "series": series_words(r),
    }


def series_words(r: dict[str, Any]) -> str:
    """The axes that shape a series, in words: context, order, warm-up before the first shot."""
    words = [f"trace {r['trace']} {r['request_id'] or 'mix'}" if r.get("trace") else ""]
    words.append(f"ctx {r['context_tokens_requested']}" if r["context_tokens_requested"] else "")
    if r["order"] and r["order"] != "same":
        words.append(f"order {r['order']}")
    if r["precondition_s"]:
        words.append(f"{r['precondition_s']:g} s warm-up")
    return " · ".join(w for w in words if w)


def which_shot_short(r: dict[str, Any], with_protocol: bool = True) -> str:
    """'warm · shots 3-6 · 0 s rest': the row's which-shot words without the timer (each column names
    its own); the figure's full which_shot sentence is in figures.parquet."""
    if r["protocol"] == "cold":
        words = ["shot 1 of each fresh process"]
    else:
        words = [f"shots {r['shot_indices']}" if r["shot_indices"] else "no warm value"]
        words += [f"{r['rest_s']:g} s rest"] if r["rest_s"] is not None else []
    return " · ".join(([r["protocol"]] if with_protocol else []) + words)


def _order_workload_rows(rows: list[dict[str, Any]]) -> None:
    """Config order on every axis, the no-draft mode first in each group; mark where groups start."""
    group_axes = [a for a in AXES if a != "spec_mode"]
    first_seen: dict[tuple, int] = {}
    for row in rows:
        first_seen.setdefault(tuple(row[a] for a in group_axes), len(first_seen))
    modes = list(dict.fromkeys(row["spec_mode"] for row in rows))
    rows.sort(
        key=lambda row: (
            first_seen[tuple(row[a] for a in group_axes)],
            -1 if row["spec_mode"] == NO_DRAFT else modes.index(row["spec_mode"]),
        )
    )
    _mark_group_starts(rows, group_axes)


def _mark_group_starts(rows: list[dict[str, Any]], axes: list[str]) -> None:
    previous = None
    for row in rows:
        group = tuple(row[a] for a in axes)
        row["group_start"] = group != previous
        previous = group


def side_table(
    records: list[dict[str, Any]], shown: set[str], side: Side, beside: str, key: str, title: str, intro: str
) -> SideTable | None:
    """Cells that two or more sides of the axis ran, side by side; None with one side."""
    axis = side.axis
    sides = list(dict.fromkeys(r[axis] for r in records if r[axis]))
    if len(sides) < 2:
        return None
    others = [a for a in AXES if a != axis]
    group_axes = [a for a in others if a != "spec_mode"]
    ran = {}
    for r in records:
        ran.setdefault(tuple(r[a] for a in group_axes), set()).add(r[axis])
    columns = vs_reference(side)
    metrics = {m for m, *_ in PER_SIDE + columns}
    rows: dict[tuple, dict[str, Any]] = {}
    for r in records:
        if r["metric"] not in metrics or len(ran[tuple(r[a] for a in group_axes)]) < 2:
            continue
        row = rows.setdefault(tuple(r[a] for a in others), {**row_head(r), axis: None})
        row["cells"][(r[axis], r["metric"])] = r
        shown.add(r["figure_id"])
    ordered = _with_which_shot(list(rows.values()))
    _order_workload_rows(ordered)
    head_axis = beside if any(r[beside] for r in ordered) else None
    return SideTable(axis, side.noun, key, title, intro, sides, columns, head_axis, ordered)


def series_table(records: list[dict[str, Any]], shown: set[str]) -> SeriesTable:
    points = [r for r in records if r["shot_index"] is not None and r["metric"] in SERIES_METRICS]
    rows: dict[tuple, dict[str, Any]] = {}
    for r in points:
        row = rows.setdefault((r["cell_id"], r["metric"]), {**row_head(r), "metric": r["metric"]})
        row["cells"][r["shot_index"]] = r
        shown.add(r["figure_id"])
    indices = sorted({r["shot_index"] for r in points})
    return SeriesTable(indices, list(rows.values()))


def _section(records, shown, key, title, intro, test: Callable[[dict[str, Any]], bool]) -> Section:
    rows = [r for r in records if r["figure_id"] not in shown and test(r)]
    shown.update(r["figure_id"] for r in rows)
    return Section(key, title, intro, rows)


def _lists(key: str) -> Callable[[dict[str, Any]], bool]:
    """The figure rows a section lists (of those no table above took): the constants section the
    assumed ones, "other" every one left, any other section those of its metrics (figures.metrics)."""
    if key == "constants":
        return lambda r: r["kind"] == "assumed"
    if key == "other":
        return lambda r: True
    return lambda r: key in places(r["metric"])
