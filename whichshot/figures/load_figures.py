"""The load axes against each other: seed 000's prefill chunk table and seed 002's one stream
against two.

Chunk size: each cell's prefill tok/s over that of the cell equal on every other axis with the
largest chunk of the grid (unchunked where that chunk holds the whole prompt), and the DRAM bytes
one prefill moved: GPM's DRAM bandwidth utilisation over the prefill x the GPU's peak bandwidth x
the prefill's seconds. GPM gives utilisation as a share of that peak, so the bytes rest on the
vendor's figure: inferred. Without GPM (a CPU) the bytes are not measured and no figure is made.

Concurrency: N requests in flight against one process of N slots. Per cell the streams' own decode
speed, the aggregate decode speed and the longest TTFT (cell statistics, cell_figures), the context
each slot got (engine-reported); here the aggregate over one stream's decode of the cell equal on
every other axis, and each stream's own speed over that one stream's."""

from typing import Any

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.ceiling_figures import machine_of, probed_machines
from whichshot.figures.cells import Cell, group_cells
from whichshot.shots.axes import AXES, ONE_STREAM

PEAK_BANDWIDTH = "gpu_peak_bandwidth_bytes_s"  # the vendor's: GPM's utilisation is a share of it
DRAM_COLUMNS = ["prefill_dram_bw_util_median_pct", "ttft_s"]
# (ratio metric, this cell's metric, the one-stream cell's metric)
STREAM_RATIOS = (
    ("aggregate_decode_vs_one_stream", "aggregate_decode_tok_s", "decode_tok_s"),
    ("stream_decode_vs_one_stream", "stream_decode_tok_s_mean", "decode_tok_s"),
)
CAPACITY_COLUMNS = ("context_tokens_engine", "kv_cache_mib")


def load_figures(catalog: Catalog) -> list[figure.Figure]:
    shots = catalog.shots
    if shots.empty or "prefill_chunk_tokens" not in shots:
        return []
    figures = []
    machines = probed_machines(catalog.probes)
    ok = shots[shots["status"] == "ok"]
    largest = _largest_chunks(ok)
    several_streams = ok["parallel_streams"].nunique() > 1
    for cell, rows in group_cells(ok):
        machine = machine_of(machines, set(rows["hostname"]))  # the peak of the GPU it ran on
        peak = catalog.find(machine.cell, PEAK_BANDWIDTH) if machine else None
        if peak is not None and rows[DRAM_COLUMNS[0]].notna().any():
            figures.append(_dram_bytes(catalog, cell, rows, peak))
        chunk = largest.get(_without(cell, "prefill_chunk_tokens"))
        if chunk is not None and chunk != cell["prefill_chunk_tokens"]:
            figures += _versus(catalog, cell, {"prefill_chunk_tokens": chunk}, _CHUNK_RATIO)
        if several_streams:
            figures += [_capacity(catalog, cell, rows, column) for column in CAPACITY_COLUMNS
                        if rows[column].notna().any()]  # fmt: skip
            if cell["parallel_streams"] != ONE_STREAM:
                figures += _versus(catalog, cell, {"parallel_streams": ONE_STREAM}, STREAM_RATIOS)
    return figures


def _without(cell: Cell, axis: str) -> tuple:
    return tuple(value for name, value in cell.items() if name != axis)


def _largest_chunks(shots: pd.DataFrame) -> dict[tuple, int]:
    """The largest prefill chunk among cells equal on every other axis, where they have several."""
    others = tuple(axis for axis in AXES if axis != "prefill_chunk_tokens")
    largest = {}
    for group, rows in group_cells(shots, others):
        chunks = rows["prefill_chunk_tokens"].dropna()
        if chunks.nunique() > 1:
            largest[_without(group, "prefill_chunk_tokens")] = int(chunks.max())
    return largest


_CHUNK_RATIO = (("prefill_tok_s_vs_largest_chunk", "prefill_tok_s", "prefill_tok_s"),)


def _dram_bytes(catalog: Catalog, cell: Cell, rows: pd.DataFrame, peak: figure.Figure) -> figure.Figure:
    selection = catalog.rule(cell["protocol"]).select(rows, DRAM_COLUMNS[0])
    return figure.from_shots(
        "prefill_dram_bytes",
        cell,
        selection,
        "dram_bytes_moved",
        DRAM_COLUMNS,
        unit="B",
        inputs=[peak],
        formula=f"median over the rule's shots of GPM DRAM bandwidth utilisation over the prefill x "
        f"{PEAK_BANDWIDTH} x TTFT",
        computed_by=load_figures,
        note="; ".join(selection.problems),
    )


def _versus(catalog: Catalog, cell: Cell, other: dict[str, Any], ratios) -> list[figure.Figure]:
    """Ratios of this cell's figures over those of the cell that differs only by `other`."""
    baseline = {**cell, **other}
    if baseline == cell:
        return []
    found = []
    for metric, top, bottom in ratios:
        numerator, denominator = catalog.find(cell, top), catalog.find(baseline, bottom)
        if numerator is None or denominator is None:
            continue
        found.append(
            figure.from_figures(
                metric,
                [numerator, denominator],
                "ratio",
                unit="ratio",
                formula=f"this cell's {top} / {bottom} of the cell with {_words(other)}",
                computed_by=load_figures,
                cell=cell,
                baseline=baseline,
            )
        )
    return found


def _capacity(catalog: Catalog, cell: Cell, rows: pd.DataFrame, column: str) -> figure.Figure:
    selection = catalog.rule(cell["protocol"]).select(rows, column)
    return figure.from_shots(
        column,
        cell,
        selection,
        "median",
        [column],
        formula=f"{column} the engine reported at start-up, median over the rule's shots",
        computed_by=load_figures,
    )


def _words(axes: dict[str, Any]) -> str:
    return ", ".join(f"{axis} {value}" for axis, value in axes.items())
