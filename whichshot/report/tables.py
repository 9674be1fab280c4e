"""The report's tables as plain rows, built from figures.parquet only (HTML and Markdown share them).
Rows are cells, read from the figures' axis columns; nothing here takes an id apart.

Every figure lands in at least one table; a metric no table knows (e.g. one a new figure family
adds) goes to "Other figures", so nothing in the figure table is left out of the report.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from whichshot.figures import cell_figures
from whichshot.figures.answer_figures import ANSWER_METRICS
from whichshot.figures.caveats.gates import gate_label, gate_words, gated_out
from whichshot.figures.caveats.telemetry_rules import ENERGY_UNSTABLE
from whichshot.figures.cells import clean
from whichshot.figures.constants import CONSTANTS
from whichshot.figures.engine_figures import ENGINES
from whichshot.figures.node_figures import NODES
from whichshot.figures.noise import METHOD as NOISE_METHOD
from whichshot.figures.side_figures import SAME_OUTPUT, Side
from whichshot.figures.speedup_model_figures import (
    PREDICTED_SPEEDUP,
    PREDICTION_RESIDUAL,
    QUIET_PREDICTION_RESIDUAL,
    VERIFY_COST,
)
from whichshot.figures.workload_figures import COUNT_RATIOS, SHARES, SPEEDUP_METRIC
from whichshot.shots.axes import AXES, BASE_WORKLOAD, NO_DRAFT, TRACE_WORKLOAD

# (metric, column header, unit shown in the header)
HEADLINE_COLUMNS = (
    ("ttft_s", "TTFT", "s"),
    ("prefill_tok_s", "prefill", "tok/s"),
    ("decode_tok_s", "decode", "tok/s"),
    ("engine_prefill_tok_s", "prefill (engine)", "tok/s"),
    ("engine_decode_tok_s", "decode (engine)", "tok/s"),
    ("energy_j_per_output_token", "J/output token", "J/token, counter"),
    ("energy_j_per_prefill_token", "J/prefill token", "J/token, counter"),
    ("shots_ok", "ok", "shots"),
)
WORKLOAD_COLUMNS = (
    ("decode_tok_s", "decode", "tok/s"),
    ("speedup_vs_none", "speed-up over none", "×"),
    ("acceptance_rate", "acceptance", "%"),
    ("engine_draft_mean_len", "mean len", "tokens/step"),
    ("copy_fraction", "copy from input", "%"),
    ("self_repetition", "self-repetition", "%"),
    ("prompt_self_repetition", "input repeats itself", "%"),
    ("lossless_share", "lossless vs none", "shots"),
)
# A trace: the whole mix per mode (and per text kind), then each request.
TRACE_MIX_COLUMNS = (
    ("mix_speedup", "mix speed-up", "×"),
    ("mix_decode_s_saved", "decode time saved", "s per pass"),
    ("mix_copy_fraction", "copy from input", "%"),
    ("requests_measured", "requests run", "requests"),
    ("requests_skipped", "skipped", "requests"),
)
TRACE_REQUEST_COLUMNS = (
    ("output_tokens", "output", "tokens"),
    ("decode_tok_s", "decode", "tok/s"),
    ("speedup_vs_none", "speed-up over none", "×"),
    ("acceptance_rate", "acceptance", "%"),
    ("copy_fraction", "copy from input", "%"),
    ("self_repetition", "self-repetition", "%"),
    ("lossless_share", "lossless vs none", "shots"),
    ("shots_ok", "ok", "shots"),
)
# A speed-up that is gated out (caveats.gates: task gate failed, or lossy) is set apart, struck.
SPEEDUP = SPEEDUP_METRIC
# Per drafted cell: the measured speed-up beside the cost model's (figures.speedup_model_figures).
SPEEDUP_MODEL_COLUMNS = (
    ("speedup_vs_none", "measured speed-up", "×"),
    (PREDICTED_SPEEDUP, "predicted", "×"),
    (PREDICTION_RESIDUAL, "unexplained", "measured / predicted - 1"),
    (QUIET_PREDICTION_RESIDUAL, "unexplained, quiet", "without host-busy shots"),
    (VERIFY_COST, "verify cost", "t(k+1) / t(1)"),
    ("engine_draft_mean_len", "mean len", "tokens/step"),
)
# Per cell: the other timings of workload cells (the headline has the grid's), clocks, power, energy.
DETAIL_COLUMNS = (
    ("shots_ok", "ok", "shots"),
    ("ttft_s", "TTFT", "s"),
    ("prefill_tok_s", "prefill", "tok/s"),
    ("engine_prefill_tok_s", "prefill (engine)", "tok/s"),
    ("engine_decode_tok_s", "decode (engine)", "tok/s"),
    ("sm_clock_median_mhz", "SM clock", "MHz"),
    ("cpu_freq_median_mhz", "CPU clock", "MHz"),
    ("gpu_power_median_w", "power, NVML median", "W"),
    ("gpu_energy_power_w", "power, energy counter", "W"),
    ("energy_j_per_token", "energy", "J/token"),
    ("energy_j_per_output_token", "J/output token", "J/token, counter"),
    ("energy_j_per_prefill_token", "J/prefill token", "J/token, counter"),
)
# Per-workload checks: (metric, short name, what a hit means)
CHECKS = (
    ("task_done_share", "task", "passed its workload's task gate"),
    ("loop_share", "loop", "the output ends in a degenerate loop"),
    ("recall_exact_share", "recall", "the document came back verbatim"),
    ("edit_made_share", "edit", "the returned file has the asked rename"),
    ("edit_intact_share", "rest intact", "nothing but the rename changed"),
    ("needle_found_share", "needle", "the planted passphrase is in the output"),
    ("code_parses_share", "parses", "the code parses as Python 3"),
)
# The side-by-side tables (engines; nodes of a node comparison): per side (the cells' own figures),
# then each side against the reference side.
PER_SIDE = (
    ("decode_tok_s", "decode", "tok/s"),
    ("prefill_tok_s", "prefill", "tok/s"),
    ("ttft_s", "TTFT", "s"),
    ("speedup_vs_none", "speed-up over none", "×"),
    ("lossless_share", "lossless vs none", "% of shots"),
)


def vs_reference(side: Side) -> tuple[tuple[str, str, str], ...]:
    """The columns that set a side against the reference side."""
    return (
        (side.metric("decode_ratio"), "decode vs", "×"),
        (side.metric("prefill_ratio"), "prefill vs", "×"),
        (side.metric(SAME_OUTPUT), "same output as", "% of shots"),
    )


# (side, the other side's axis (a first column where rows differ in it), anchor, title, what the
# sides share and what differs)
SIDES = (
    (ENGINES, NODES.axis, "engines", "Engines side by side",
     "The same model file, prompt, workload and protocol on each engine, in one run. A speculative mode "
     "is one engine kind's setting: an engine without it shows —, it never ran as no drafting."),
    (NODES, ENGINES.axis, "nodes", "Nodes side by side",
     "The same engine build, model file, prompt, workload and protocol on each node of the comparison "
     "(placement.compare_nodes), in one run. A ratio is of whole machines: GPU, driver, power limit, "
     "CPU and their load differ with the node (caveat nodes_compared; the machines table under What "
     "ran says what each node recorded)."),
)  # fmt: skip
CEILING_METRICS = frozenset(
    {
        "cpu_copy_bandwidth_bytes_s",
        "cpu_copy_one_thread_bandwidth_bytes_s",
        "cpu_gemm_flop_s",
        "cpu_engine_matmul_flop_s",
        "gpu_engine_matmul_flop_s",
        "gpu_peak_bandwidth_bytes_s",
        "gpu_copy_bandwidth_bytes_s",
        "gpu_gemm_flop_s",
        "gpu_peak_flop_s",
        "weight_bytes_per_token",
        "kv_bytes_per_context_token",
        "active_parameters_per_token",
        "prefill_parameters_per_token",
        "attention_flops_per_context_token",
        "decode_ceiling_tok_s",
        "decode_share_of_ceiling",
        "prefill_ceiling_tok_s",
        "prefill_share_of_ceiling",
    }
)
# The load table (seed 000's chunk table, seed 002's streams against capacity): per protocol-grid cell
# where the run varies the prefill chunk or the parallel streams.
LOAD_COLUMNS = (
    ("prefill_tok_s", "prefill", "tok/s"),
    ("prefill_tok_s_vs_largest_chunk", "vs largest chunk", "×"),
    ("prefill_dram_bytes", "DRAM bytes per prefill", "B"),
    ("energy_j_per_prefill_token", "energy per prefill token", "J/token"),
    ("decode_tok_s", "decode, stream 1", "tok/s"),
    ("stream_decode_tok_s_mean", "decode per stream", "tok/s"),
    ("aggregate_decode_tok_s", "decode, all streams", "tok/s"),
    ("aggregate_decode_vs_one_stream", "all streams vs one", "×"),
    ("stream_decode_vs_one_stream", "per stream vs one", "×"),
    ("stream_ttft_max_s", "longest TTFT", "s"),
    ("context_tokens_engine", "context per slot", "tokens"),
    ("kv_cache_mib", "KV cache", "MiB"),
)
LOAD_AXES = ("prefill_chunk_tokens", "parallel_streams")
# Aggregations that are a cell's statistic under its protocol's rule (the row's which-shot words).
STATISTICS = ("median", "median_of_series_medians")
SERIES_METRICS = ("prefill_tok_s", "decode_tok_s", "sm_clock_median_mhz", "cpu_freq_median_mhz")
CROSSCHECK_METRICS = frozenset(
    {
        "client_vs_engine_decode_ratio",
        "client_vs_engine_prefill_ratio",
        *(
            f"{test}_vs_llama_bench_ratio{end}"
            for test in ("prefill", "decode")
            for end in ("", "_low", "_high")
        ),
        *(f"bench_{test}_tok_s{end}" for test in ("pp", "tg") for end in ("", "_lowest", "_highest")),
    }
)
SPEEDUP_MODEL_METRICS = frozenset(
    {VERIFY_COST, PREDICTED_SPEEDUP, PREDICTION_RESIDUAL, QUIET_PREDICTION_RESIDUAL}
)
CLOCK_METRICS = frozenset(
    {
        "prefill_tok_s_clock_predicted",
        "prefill_tok_s_clock_residual",
        "prefill_tok_s_warm_cold_ratio",
        "decode_tok_s_clock_predicted",
        "decode_tok_s_clock_residual",
        "decode_tok_s_warm_cold_ratio",
        "sm_clock_best_median_mhz",
        "clock_drop_thermal_normal_shots",
        "outlier_shots",
    }
)


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
    _set_apart_undone(workloads)
    trace_mix = cell_rows([r for r in traced if r["request_id"] is None], TRACE_MIX_COLUMNS, shown)
    trace_requests = cell_rows([r for r in traced if r["request_id"]], TRACE_REQUEST_COLUMNS, shown,
                               with_protocol=False)  # fmt: skip
    _order_workload_rows(trace_requests)
    _set_apart_undone(trace_requests)  # a request's gated-out speed-up is struck as a workload's
    sides = [t for t in (side_table(per_cell, shown, *side) for side in SIDES) if t is not None]
    modelled = {r["cell_id"] for r in per_cell if r["metric"] == PREDICTED_SPEEDUP}
    speedup_model = cell_rows([r for r in per_cell if r["cell_id"] in modelled], SPEEDUP_MODEL_COLUMNS, shown,
                              with_protocol=False)  # fmt: skip
    _order_workload_rows(speedup_model)
    _set_apart_undone(speedup_model)  # a gated-out speed-up is struck here too
    load = cell_rows(_load_cells(base), LOAD_COLUMNS, shown)
    in_headline = {m for m, *_ in HEADLINE_COLUMNS}
    telemetry = cell_rows(
        [r for r in per_cell if r["workload"] != BASE_WORKLOAD or r["metric"] not in in_headline],
        DETAIL_COLUMNS,
        shown,
    )
    series = series_table(records, shown)
    sections = [
        _section(
            records,
            shown,
            "crosschecks",
            "Cross-checks: two timers side by side",
            "Our client against the engine's own timings, and the engine's warm speed against llama-bench "
            "(another tool with its own protocol).",
            lambda r: r["metric"] in CROSSCHECK_METRICS,
        ),
        _section(
            records,
            shown,
            "power",
            "Clock ratio, clock drops and outliers",
            "Is a warm slowdown only the clock? Each prediction assumes a fixed cycle count per token.",
            lambda r: r["metric"] in CLOCK_METRICS,
        ),
        _section(
            records,
            shown,
            "ceilings",
            "Physical ceilings: how close to the wall?",
            "Decode ceiling = peak bandwidth / bytes read per token (weights plus KV cache); prefill ceiling "
            "= peak compute / FLOPs per prompt token. Inferred: they rest on that model of the machine. A "
            "decode share above 1 needs more than one token per weight read (drafting); any other share "
            "above 1 is a defect of the ceiling (caveat share_above_ceiling). On a CPU the compute peak is "
            "the engine's own kernels at the model's weight types (llama-bench on a synthetic model), else "
            "our float32 GEMM probe.",
            lambda r: r["metric"] in CEILING_METRICS or "_engine_matmul_" in r["metric"],
        ),
        _section(
            records,
            shown,
            "noise",
            "Noise: spreads, intervals and verdicts",
            f"The answer block's figures with their provenance. Noise: {NOISE_METHOD}.",
            lambda r: r["metric"] in ANSWER_METRICS,
        ),
        _section(
            records,
            shown,
            "constants",
            "Constants our judgments rest on",
            "Tolerances and thresholds we chose (assumed); every caveat and plot that uses one reads it "
            "from here.",
            lambda r: r["kind"] == "assumed",
        ),
        _section(
            records,
            shown,
            "other",
            "Other figures",
            "Figures of this run that no table above lays out (shown with their full provenance).",
            lambda r: True,
        ),
    ]
    inferred = [r for r in records if r["kind"] == "inferred"]
    return ReportTables(run, headline, load, workloads, trace_mix, trace_requests, sides, telemetry,
                        series, [s for s in sections if s.rows], inferred, shown, speedup_model)  # fmt: skip


def _load_cells(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The protocol grid's figure rows, where the run has several prefill chunks or stream counts."""
    varied = [axis for axis in LOAD_AXES if len({r[axis] for r in records if r[axis] is not None}) > 1]
    return records if varied else []


def named_metrics() -> frozenset[str]:
    """Every metric a table of the report lays out by name, every cell statistic, every workload ratio
    and share, and the constants: the metrics a claim can name."""
    columns = (HEADLINE_COLUMNS, WORKLOAD_COLUMNS, DETAIL_COLUMNS, CHECKS, PER_SIDE,
               *(vs_reference(side) for side, *_ in SIDES), TRACE_MIX_COLUMNS, TRACE_REQUEST_COLUMNS,
               COUNT_RATIOS, SHARES, LOAD_COLUMNS)  # fmt: skip
    named = {row[0] for table in columns for row in table} | {constant.metric for constant in CONSTANTS}
    statistics = (*cell_figures.CELL_COLUMNS, *cell_figures.WORKLOAD_COLUMNS, *cell_figures.DRAFTED_COLUMNS,
                  *cell_figures.TRACE_COLUMNS, *cell_figures.STREAM_COLUMNS)  # fmt: skip
    return frozenset(
        named.union(
            SERIES_METRICS,
            CROSSCHECK_METRICS,
            CLOCK_METRICS,
            CEILING_METRICS,
            ANSWER_METRICS,
            SPEEDUP_MODEL_METRICS,
            statistics,
        )  # fmt: skip
    )


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


def _set_apart_undone(rows: list[dict[str, Any]]) -> None:
    """Mark the rows whose speed-up is gated out (the task gate failed, or the output was not
    lossless): speedup_gate is the short label shown with the struck value, speedup_gate_words why."""
    for row in rows:
        gates = gated_out(row["cells"].get(SPEEDUP))
        row["speedup_set_apart"] = bool(gates)
        row["speedup_gate"] = gate_label(gates)
        row["speedup_gate_words"] = gate_words(gates)


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


def check_summary(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The workload checks present in a row: figure, words, hits and shots."""
    found = []
    for metric, name, meaning in CHECKS:
        figure = row["cells"].get(metric)
        if figure is None or figure["value"] is None:
            continue
        n = len(figure["shot_ids"])
        found.append(
            {"figure": figure, "name": name, "meaning": meaning, "hits": round(figure["value"] * n), "n": n}
        )
    return found


def energy_verdict(figure: dict[str, Any] | None) -> str:
    """An energy-per-token figure's verdict in words: 'not measured' without a value, 'unstable'
    where its stability caveat fired, else 'stable'; 'from a back-to-back series of K shots' where
    it used one (the figure's note says what the verdict rests on)."""
    if figure is None or figure["value"] is None:
        return "not measured"
    word = "unstable" if ENERGY_UNSTABLE[figure["metric"]] in figure["caveat_ids"] else "stable"
    if "back-to-back series" in figure["which_shot"]:
        word += f", from a back-to-back series of {len(figure['shot_ids'])} shots"
    return word
