"""Each table of the report described once: its key, title, intro, legend, columns (axis words, the
metric columns of figures.metrics, and the special cells of report.cells) and whether summary.md
shows it. lay_out renders every table of a run into neutral rows of cells in page order; the HTML
template and the Markdown summary only format them, so a table has the same columns and rows in both.
"""

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from whichshot.figures.answer_figures import LOSSLESS_SHARE
from whichshot.figures.caveats.gates import struck_legend
from whichshot.figures.metrics import (
    CHECKS,
    DETAIL_COLUMNS,
    HEADLINE_COLUMNS,
    LOAD_COLUMNS,
    PER_SIDE,
    SPEEDUP_MODEL_COLUMNS,
    TRACE_MIX_COLUMNS,
    TRACE_REQUEST_COLUMNS,
    WORKLOAD_COLUMNS,
)
from whichshot.figures.metrics import Column as MetricColumn
from whichshot.report.cells import (
    NOT_APPLICABLE,
    STRUCK_MARK,
    Cell,
    CellWriter,
    Part,
    which_shot,
    words,
)
from whichshot.report.format import NOT_MEASURED, format_bare, format_lossless
from whichshot.report.tables import ReportTables, SideTable

Row = dict[str, Any]  # a row of report.tables: a cell's axes, its figures under "cells", which_shot


@dataclass(frozen=True)
class Column:
    """One column: its header, unit, the group above it (a side of a side-by-side table) and how a
    row's cell is made; named: the (metric, name) pairs of the figures it shows."""

    header: str
    cell: Callable[[Row, CellWriter], Cell]
    unit: str = ""
    group: str = ""
    named: tuple[tuple[str, str], ...] = ()
    repeats: bool = False  # an axis the rows are grouped by: index.html fades it within a group


@dataclass(frozen=True)
class TableSpec:
    """A report table: key (its anchor), title, nav (its link's words; '' for none), intro (what it
    shows and why: index.html's paragraph above it), columns, legend (what its columns and signs
    mean: under it in both formats); empty: words shown in place of a table without rows ('' leaves
    it out); fold_above: index.html folds a table of more rows."""

    key: str
    title: str
    nav: str
    intro: str
    columns: tuple[Column, ...]
    legend: str = ""
    in_summary: bool = True
    empty: str = ""
    fold_above: int | None = None
    fold_words: str = ""


@dataclass(frozen=True)
class TableRow:
    cells: tuple[Cell, ...]
    group_start: bool = False


@dataclass(frozen=True)
class Table:
    """A table laid out: its description and its rows of cells."""

    spec: TableSpec
    rows: tuple[TableRow, ...]
    legend: str  # the description's legend, and what ✗ means where a cell is struck

    @property
    def named(self) -> list[tuple[str, str]]:
        """Each metric the table shows, once, with its column's name."""
        return list(dict.fromkeys(pair for column in self.spec.columns for pair in column.named))

    @property
    def folded(self) -> bool:
        return self.spec.fold_above is not None and len(self.rows) > self.spec.fold_above

    def header_rows(self) -> list[list[tuple[str, int]]]:
        """index.html's two header rows as (text, span): titles (a group's name over its columns),
        then units (a grouped column's title and unit); one row where no column has either."""
        columns = self.spec.columns
        first: list[tuple[str, int]] = []
        for at, column in enumerate(columns):
            if column.group and at and columns[at - 1].group == column.group:  # a group's columns adjoin
                first[-1] = (column.group, first[-1][1] + 1)
            else:
                first.append((column.group or column.header, 1))
        if not any(c.unit or c.group for c in columns):
            return [first]
        second = [(f"{c.header} ({c.unit})" if c.group else c.unit, 1) for c in columns]
        return [first, second]


# --- column kinds ---------------------------------------------------------------------------------


def axis(header: str, name: str, unit: str = "", repeats: bool = False, numeric: bool = False) -> Column:
    """A row's axis value."""
    return Column(header, lambda row, _w: words(row[name], numeric=numeric), unit, repeats=repeats)


def worded(header: str, text: Callable[[Row], str], look: str = "", repeats: bool = False) -> Column:
    """Words made from the row's axes."""
    return Column(header, lambda row, _w: words(text(row), cell_look=look), repeats=repeats)


def figure(metric: MetricColumn, missing: str = NOT_APPLICABLE, key: Any = None, header: str = "",
           group: str = "", lossless_counts: bool = True) -> Column:  # fmt: skip
    """A metric column of figures.metrics: the row's figure of that metric (under `key` where the
    row keys its figures otherwise), or `missing`. A lossless share reads 'k/n identical' with
    lossless_counts, else as its percentage."""
    name, title, unit = metric
    text = format_lossless if name == LOSSLESS_SHARE and lossless_counts else format_bare
    at = name if key is None else key
    return Column(header or title, lambda row, w: w.metric(name, row["cells"].get(at), missing, text),
                  unit, group, ((name, header or title),))  # fmt: skip


def figures(metrics: tuple[MetricColumn, ...], missing: str = NOT_APPLICABLE) -> tuple[Column, ...]:
    return tuple(figure(m, missing) for m in metrics)


def mode(ids_on_hover: bool = True) -> Column:
    """The speculative mode, in bold; the row's figure ids on hover where they share its cell id."""

    def cell(row: Row, _w: CellWriter) -> Cell:
        hover = f"figure ids: {row['cell_id']}/<metric>" if ids_on_hover else ""
        return Cell(((Part(row["spec_mode"] or NOT_APPLICABLE, look="bold"),),), hover=hover)

    return Column("speculative mode", cell)


def which(unit: str = "", with_id: bool = False) -> Column:
    return Column("which shot", lambda row, _w: which_shot(row, with_id), unit)


CHECKS_COLUMN = Column("checks", lambda row, w: w.checks(row), "shots passing",
                       named=tuple((m, name) for m, name, _meaning in CHECKS))  # fmt: skip
ENGINE = axis("engine", "engine_on")
MODEL = axis("model", "model")


def case(row: Row, *more: str) -> str:
    """'verbatim_recall p384 · real' and more axes in words."""
    prompt = f" p{row['prompt_tokens_requested']}" if row["prompt_tokens_requested"] else ""
    return " · ".join([f"{row['workload']}{prompt}", row["text_kind"], *(m for m in more if m)])


def _timer(metric: str, unit: str) -> str:
    """A headline unit with whose clock timed it where its title does not say: 's, client'."""
    client_timed = (metric.endswith("_tok_s") or metric == "ttft_s") and not metric.startswith("engine_")
    return f"{unit}, client" if client_timed else unit


# --- the tables, in page order --------------------------------------------------------------------

HEADLINE = TableSpec(
    "headline", "Cold and warm: which shot?", "Cold and warm",
    "Cold = shot 1 of a fresh process, sent once the engine reported ready (load time is recorded apart, "
    "never inside a shot). Warm = consecutive ok shots of one process; the warm figure is the median over "
    "the shot indices named in each row.",
    (ENGINE, MODEL, axis("prompt", "prompt_tokens_requested", "tokens", numeric=True),
     worded("series", lambda row: row["series"], "series"),
     which("protocol; shots used; rest", with_id=True),
     *(figure((m, title, _timer(m, unit)), NOT_MEASURED) for m, title, unit in HEADLINE_COLUMNS)),
    empty="No protocol-grid figures in this run.",
)  # fmt: skip


def series_spec(indices: list[int]) -> TableSpec:
    """Warm cells shot by shot: a column per shot index."""
    return TableSpec(
        "series", "Warm series shot by shot", "Shot by shot",
        "Seed 000's question, in numbers: the same cell at each shot index of one process (median over its "
        "series at that index; only consecutive ok shots of one process). The warm figure above uses the "
        "indices its row names.",
        (worded("engine · model", lambda row: f"{row['engine_on']} · {row['model']}"),
         worded("cell", lambda row: case(row, row["spec_mode"], f"{row['rest_s']:g} s rest", row["series"]),
                "series"),
         Column("metric", lambda row, _w: words(row["metric"], look="code")),
         *(Column(f"shot {i}", lambda row, w, i=i: w.metric(row["metric"], row["cells"].get(i)))
           for i in indices)),
        in_summary=False, fold_above=24, fold_words="rows: every warm cell's speeds and clock by shot index",
    )  # fmt: skip


WORKLOADS = TableSpec(
    "workloads", "Workloads × speculative modes", "Workloads × speculative modes",
    "Seed 002's table: each workload with and without drafting, on real text and on synthetic filler, "
    "under the cold and the warm protocol. Speed-up = decode speed over the no-draft cell of the same "
    "workload, text and protocol. Lossless = greedy output token-identical to the no-draft output "
    "(measured, not assumed). Copy from input = share of output tokens in 8-token spans found in the "
    "prompt; self-repetition = share in 8-token spans that repeat the output's own earlier text; input "
    "repeats itself = the same measure over the prompt.",
    (*(axis(h, a, repeats=True) for h, a in (("engine", "engine_on"), ("model", "model"),
                                              ("workload", "workload"), ("text", "text_kind"),
                                              ("protocol", "protocol"))),
     mode(), *figures(WORKLOAD_COLUMNS), CHECKS_COLUMN, which("shots used; rest")),
    legend="— = does not apply (no drafting, or no such check for this workload).",
)  # fmt: skip
SPEEDUP_MODEL = TableSpec(
    "speedup-model", "Why drafting gains this much here: a cost model", "Why drafting gains",
    "A verification step checking k drafts and accepting a of them costs none(k) + a × token(k) one-token "
    "steps, timed by the server itself right after the drafted series (its verify probe): none(k) is its "
    "step with no draft accepted (the forward pass over k+1 positions, one sampling), token(k) what each "
    "accepted token adds (sampling its position on the host, emitting it), from the step with every draft "
    "accepted. "
    "Kernel share and per-token share split a verification step between the two: where a forward pass over "
    "many positions costs little more than one (a GPU, a small model), the per-token share sets the "
    "speed-up. Where the probe timed the series' own drafter, every step also costs its host-side lookup "
    "(drafter share). A probe whose kept repetitions spread more than the stated factor "
    "(verify_probe_spread_limit) feeds no prediction. Inferred: the prediction rests on this model; "
    "\"unexplained\" is what it leaves out (partly accepted drafts, the spread of draft lengths, a draft "
    "model's own cost, host load).",
    (MODEL, axis("workload", "workload"), axis("text", "text_kind"), axis("protocol", "protocol"), mode(),
     *figures(SPEEDUP_MODEL_COLUMNS)),
    legend="Predicted = decoded tokens / (plain steps + verification steps × step), from each drafted "
    "cell's own counts (engine-reported drafts, accepted tokens and mean accepted length per step); step = "
    "none(k) + a × token(k) one-token steps at the cell's mean draft k and accepted a: the server's own step "
    "times, with no draft or every draft accepted. Kernel share = none(k) / step, per-token share = a × "
    "token(k) / step. Verify cost, kernel only = llama-bench's batch of the last token and k drafts over one "
    "token, no sampling. Unexplained = measured / predicted - 1.",
)  # fmt: skip
LOAD = TableSpec(
    "load", "Prefill chunk and parallel streams", "Chunk and streams",
    "Seed 000's chunk table and seed 002's one stream against two, from this run. With N streams, N copies "
    "of the request are in flight against a process of N slots that share the context window.",
    (ENGINE, MODEL, axis("prompt", "prompt_tokens_requested", "tokens"), axis("protocol", "protocol"),
     axis("chunk", "prefill_chunk_tokens", "tokens"), axis("streams", "parallel_streams"),
     *figures(LOAD_COLUMNS), which()),
    legend="vs largest chunk = the cell's prefill speed over that of the cell with the largest chunk and "
    "every other axis equal (unchunked where that chunk holds the prompt). DRAM bytes per prefill = GPM's "
    "DRAM bandwidth utilisation over the prefill × the GPU's datasheet peak × the prefill's seconds "
    "(inferred; no GPM, as on a CPU: not measured). Decode, all streams = every stream's tokens over the "
    "span from the first stream's first token to the last stream's last. Context per slot and KV cache: "
    "what the engine reported at start-up.",
)  # fmt: skip
TRACE_MIX = TableSpec(
    "traces", "Your traces: how much of the work is copying?", "Your traces",
    "Each request of your trace ran under the cold/warm protocol and every speculative mode, as a cell of "
    "its own. Rows with a text kind are the mix of those requests only: set the real-text mix against a "
    "synthetic-only figure.",
    (ENGINE, MODEL, axis("trace", "trace"), axis("protocol", "protocol"),
     worded("text", lambda row: row["text_kind"] or "all"), mode(), *figures(TRACE_MIX_COLUMNS), which()),
    legend="Mix speed-up = the trace's decode time without drafting over its decode time with the mode, each "
    "request weighted by its output tokens (no-draft cell): sum(out / v_none) / sum(out / v_mode). Decode "
    "time saved = the difference, in seconds, for one pass over the requests that ran. Copy from input = "
    "the output-token-weighted share of output tokens in 8-token spans found in the request.",
)  # fmt: skip
TRACE_REQUESTS = TableSpec(
    "trace-requests", "Your traces: each request", "",
    "One row per request of the trace and speculative mode; its speed-up is over the same request "
    "without drafting.",
    (*(axis(h, a, repeats=True) for h, a in (("engine", "engine_on"), ("model", "model"), ("trace", "trace"),
                                              ("request", "request_id"), ("text", "text_kind"),
                                              ("protocol", "protocol"))),
     mode(), *figures(TRACE_REQUEST_COLUMNS), which("shots used; rest")),
    in_summary=False,
)  # fmt: skip


def side_spec(table: SideTable) -> TableSpec:
    """Cells two or more sides ran, side by side: per side its cells' own figures, then (but for the
    reference side) its ratios over the reference side."""
    head = [axis(table.head_axis, table.head_axis, repeats=True)] if table.head_axis else []
    per_side = []
    for side in table.sides:
        per_side += [figure(m, key=(side, m[0]), group=side, lossless_counts=False) for m in PER_SIDE]
        if side != table.reference:
            per_side += [figure(m, key=(side, m[0]), header=f"{m[1]} {table.reference}", group=side)
                         for m in table.vs_reference]  # fmt: skip
    return TableSpec(
        table.key, table.title, table.title,
        f"{table.intro} Each {table.noun}'s columns are its cells' own figures; ratios are this {table.noun} "
        f"over {table.reference} for the same cell.",
        (*head, axis("model", "model", repeats=True), worded("case", case, repeats=True), which(),
         mode(ids_on_hover=False), *per_side),
        legend=f"— = not run on that {table.noun} or does not apply.",
    )  # fmt: skip


TELEMETRY = TableSpec(
    "telemetry", "Timings, clocks, power and energy per cell", "Per cell",
    "The same rule as the speeds (cold shot 1s, or the warm rule's shots); the timings of the protocol grid "
    "are in the first table. NVML's power reading is a trailing average: the energy counter's mean power "
    "over each shot is the one to quote, and the NVML median carries a caveat wherever the two disagree.",
    (ENGINE, MODEL, worded("case", lambda row: case(row, row["spec_mode"], row["series"]), "series"), which(),
     *figures(DETAIL_COLUMNS)),
    in_summary=False,
)  # fmt: skip


def run_wide(figures: pd.DataFrame, caveats: pd.DataFrame) -> set[str]:
    """Caveats attached to every figure that cites a shot: said once at the top, not in each cell."""
    citing = set(figures.loc[figures["shot_ids"].map(len) > 0, "figure_id"])
    return {c["caveat_id"] for c in caveats.to_dict("records") if citing and citing <= set(c["figure_ids"])}


def caveat_numbers(caveats: pd.DataFrame, everywhere: set[str]) -> dict[str, int]:
    """Each caveat's number in the list at the end (from 1), for those a cell names (not run-wide)."""
    return {c: n for n, c in enumerate(caveats["caveat_id"], start=1) if c not in everywhere}


def lay_out(tables: ReportTables, numbers: dict[str, int]) -> list[Table]:
    """Every table of the report in page order, rendered into cells whose figures name their caveats
    by `numbers` (caveat_numbers); a table without rows is left out unless it says what stands in
    its place."""
    writer = CellWriter(numbers)
    described = [
        (HEADLINE, tables.headline), (series_spec(tables.series.indices), tables.series.rows),
        (WORKLOADS, tables.workloads), (SPEEDUP_MODEL, tables.speedup_model), (LOAD, tables.load),
        (TRACE_MIX, tables.trace_mix), (TRACE_REQUESTS, tables.trace_requests),
        *((side_spec(side), side.rows) for side in tables.sides), (TELEMETRY, tables.telemetry),
    ]  # fmt: skip
    return [lay_out_table(spec, rows, writer) for spec, rows in described if rows or spec.empty]


def lay_out_table(spec: TableSpec, rows: list[Row], writer: CellWriter) -> Table:
    """One table's rows as cells; a grouping axis is marked repeated where its group goes on."""
    laid = []
    grouped = any(column.repeats for column in spec.columns)
    for row in rows:
        cells = [column.cell(row, writer) for column in spec.columns]
        start = grouped and bool(row.get("group_start"))
        if grouped and not start:
            repeats = [column.repeats for column in spec.columns]
            cells = [replace(c, repeated=True) if r else c for c, r in zip(cells, repeats, strict=True)]
        laid.append(TableRow(tuple(cells), start))
    return Table(spec, tuple(laid), _legend(spec.legend, [cell for row in laid for cell in row.cells]))


def _legend(words: str, cells: list[Cell]) -> str:
    """The description's legend, then what ✗ means where a cell is struck and what each check shown
    means."""
    gates = [gate for cell in cells for gate in cell.struck]
    struck = f"{STRUCK_MARK} = {struck_legend(gates)}." if gates else ""
    shown = {part.text for cell in cells for line in cell.lines for part in line if part.look == "check"}
    checks = "; ".join(f"{name} = {meaning}" for _m, name, meaning in CHECKS if name in shown)
    return " ".join(w for w in (words, struck, f"Checks: {checks}." if checks else "") if w)
