"""A trace's mix: how much of its output copies its input, and what each speculative mode saves
over the whole mix. Every request is a cell of its own (its figures are the cells' figures); the mix
figures are arithmetic on them, weighted by output tokens, so they cite every shot they rest on.

Weighting by output tokens is weighting by decode time: the mix's decode seconds without drafting
are sum(out_r / v0_r), with drafting sum(out_r / v1_r); the mix speed-up is their ratio, so a long
request counts for as much time as it takes and a short one cannot dominate.
"""

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import Cell, cell_of, group_cells
from whichshot.figures.statistic import ANY_STATUS, Selection
from whichshot.shots.axes import AXES, NO_DRAFT, TRACE_WORKLOAD

# A mix groups the requests of one trace on one engine, model and protocol (every other axis kept).
_PER_REQUEST = ("request_id", "text_kind", "spec_mode")
MIX_AXES = tuple(a for a in AXES if a not in _PER_REQUEST)
ALL_TEXT = None  # the whole mix; a text kind's subset sets text_kind
MIX_METRICS = ("mix_copy_fraction", "mix_speedup", "mix_decode_s_saved")


def trace_figures(catalog: Catalog) -> list[figure.Figure]:
    shots = catalog.shots
    traced = shots[shots["workload"] == TRACE_WORKLOAD] if len(shots) else shots
    figures = []
    for mix, rows in group_cells(traced, MIX_AXES):
        figures += _request_counts(mix, rows)
        kinds = list(dict.fromkeys(rows["text_kind"]))
        for kind in [ALL_TEXT, *(kinds if len(kinds) > 1 else [])]:
            subset = rows if kind is None else rows[rows["text_kind"] == kind]
            requests = list(dict.fromkeys(subset["request_id"]))
            figures += _copy_mix(catalog, mix, kind, subset, requests)
            modes = [mode for mode in dict.fromkeys(subset["spec_mode"]) if mode != NO_DRAFT]
            # Every mode's mix over the same requests: those with a value in each mode.
            complete = [r for r in requests if all(_speedup_inputs(catalog, subset, r, m) for m in modes)]
            for mode in modes:
                figures += _speedup_mix(catalog, mix, kind, mode, subset, complete, len(requests))
    return figures


def _speedup_inputs(catalog: Catalog, rows: pd.DataFrame, request: str, mode: str) -> list | None:
    metrics = (("output_tokens", NO_DRAFT), ("decode_tok_s", NO_DRAFT), ("decode_tok_s", mode))
    return _request_inputs(catalog, rows, request, metrics)


def _request_cell(rows: pd.DataFrame, request: str, mode: str) -> Cell | None:
    """The cell of one request under one mode (None if it did not run)."""
    found = rows[(rows["request_id"] == request) & (rows["spec_mode"] == mode)]
    return cell_of(found.iloc[0]) if len(found) else None


def _request_inputs(
    catalog: Catalog, rows: pd.DataFrame, request: str, metrics: tuple[tuple[str, str], ...]
) -> list[figure.Figure] | None:
    """The (metric, mode) figures of one request, in order; None unless every one has a value."""
    found = []
    for metric, mode in metrics:
        cell = _request_cell(rows, request, mode)
        fig = catalog.find(cell, metric) if cell else None
        if fig is None or fig.value is None:
            return None
        found.append(fig)
    return found


def _mix_cell(mix: Cell, kind: str | None, mode: str) -> Cell:
    return {**mix, "text_kind": kind, "spec_mode": mode, "request_id": None}


def _copy_mix(
    catalog: Catalog, mix: Cell, kind, rows: pd.DataFrame, requests: list[str]
) -> list[figure.Figure]:
    pairs = [_request_inputs(catalog, rows, r, (("output_tokens", NO_DRAFT), ("copy_fraction", NO_DRAFT)))
             for r in requests]  # fmt: skip
    inputs = [f for pair in pairs if pair for f in pair]
    if not inputs:
        return []
    return [
        figure.from_figures(
            "mix_copy_fraction",
            inputs,
            "output_weighted_mean",
            unit="fraction",
            cell=_mix_cell(mix, kind, NO_DRAFT),
            formula="sum over requests of output tokens x copy fraction / sum of output tokens; each "
            f"the request's no-draft {mix['protocol']} figure",
            computed_by=trace_figures,
            note=f"{len(inputs) // 2} of {len(requests)} requests",
        )
    ]


def _speedup_mix(
    catalog: Catalog, mix: Cell, kind, mode: str, rows: pd.DataFrame, requests: list[str], total: int
) -> list[figure.Figure]:
    inputs = [f for request in requests for f in _speedup_inputs(catalog, rows, request, mode)]
    if not inputs:
        return []
    note = f"{len(requests)} of {total} requests: those with a value in every mode of the trace"
    cell, base = _mix_cell(mix, kind, mode), _mix_cell(mix, kind, NO_DRAFT)
    words = f"each the request's {mix['protocol']} figure; out = its no-draft output tokens"
    return [
        figure.from_figures(
            "mix_speedup",
            inputs,
            "output_weighted_speedup",
            unit="ratio",
            cell=cell,
            baseline=base,
            formula=f"sum(out / decode tok/s without drafting) / sum(out / decode tok/s with {mode}); "
            + words,
            computed_by=trace_figures,
            note=note,
        ),
        figure.from_figures(
            "mix_decode_s_saved",
            inputs,
            "output_weighted_time_saved",
            unit="s",
            cell=cell,
            baseline=base,
            formula=f"sum(out / decode tok/s without drafting) - sum(out / decode tok/s with {mode}): decode "
            f"seconds one pass over the requests saves; {words}",
            computed_by=trace_figures,
            note=note,
        ),
    ]


def _request_counts(mix: Cell, rows: pd.DataFrame) -> list[figure.Figure]:
    """How many of the trace's requests ran and how many were skipped (prompt + output over the
    context); both cite every shot of the trace on this engine, model and protocol."""
    selection = Selection(
        rows, rows, f"{mix['protocol']}: every shot of the trace, ok, failed or skipped", "", ANY_STATUS
    )
    cell = _mix_cell(mix, ALL_TEXT, None)
    return [
        figure.from_shots(
            metric,
            cell,
            selection,
            "count_requests",
            ["request_id", "status"],
            unit="requests",
            parameters={"status": status},
            formula=f"distinct request_id among the trace's shots with status {status}",
            computed_by=trace_figures,
        )
        for metric, status in (("requests_measured", "ok"), ("requests_skipped", "skipped"))
    ]
