"""The report's tables as plain rows, built from figures.parquet only (HTML and Markdown share them).

Every figure lands in exactly one section table; a metric no section knows (e.g. one a new figure
module adds) goes to "Other figures", so nothing in the figure table is left out of the report.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from whichshot.lossless import NO_DRAFT
from whichshot.power import OUTLIER_METRIC
from whichshot.report.engine_table import EngineTable, engine_table

# (metric, column header, unit shown in the header)
HEADLINE_COLUMNS = (
    ("ttft_s", "TTFT", "s"),
    ("prefill_tok_s", "prefill", "tok/s"),
    ("decode_tok_s", "decode", "tok/s"),
    ("engine_prefill_tok_s", "prefill (engine)", "tok/s"),
    ("engine_decode_tok_s", "decode (engine)", "tok/s"),
)
WORKLOAD_COLUMNS = (
    ("decode_tok_s", "decode", "tok/s"),
    ("speedup_vs_none", "speed-up over none", "×"),
    ("acceptance_rate", "acceptance", "%"),
    ("draft_mean_len", "mean len", "tokens/step"),
    ("copy_fraction", "copy fraction", "%"),
    ("lossless_share", "lossless vs none", "shots"),
)
# Per-workload checks: (metric, short name, what a hit means)
CHECKS = (
    ("recall_exact_share", "recall", "the marked section came back verbatim"),
    ("edit_made_share", "edit", "the returned file has the asked rename"),
    ("needle_found_share", "needle", "the planted passphrase is in the output"),
)
BASE_WORKLOAD = "continue_text"
CROSSCHECK_METRICS = frozenset(
    {"client_vs_engine_decode_ratio", "prefill_vs_llama_bench_ratio", "bench_pp_tok_s", "bench_tg_tok_s"}
)


@dataclass
class Section:
    """A titled list of figure rows (the generic table layout)."""

    key: str
    title: str
    intro: str
    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ReportTables:
    headline: list[dict[str, Any]]
    workloads: list[dict[str, Any]]
    engines: EngineTable | None
    sections: list[Section]
    inferred: list[dict[str, Any]]
    shown_ids: set[str]


def build_tables(figures: pd.DataFrame) -> ReportTables:
    """Split the figure table into the report's tables; every figure id is shown at least once."""
    records = _records(figures)
    shown: set[str] = set()
    headline = headline_rows(records, shown)
    workloads = workload_rows(records, shown)
    engines = engine_table(records, shown)
    sections = [
        _section(records, shown, "crosschecks", "Cross-checks: two timers side by side",
                 "Our client against the engine's own timings, and our prefill against llama-bench "
                 "(another tool with its own protocol).", lambda r: r["metric"] in CROSSCHECK_METRICS),
        _section(records, shown, "power", "Clock ratio, power, energy and outliers",
                 "Is a warm slowdown only the clock? Each prediction assumes a fixed cycle count per token.",
                 _is_power_figure),
        _section(records, shown, "other", "Other figures",
                 "Figures of this run that no table above lays out (shown with their full provenance).",
                 lambda r: True),
    ]  # fmt: skip
    inferred = [r for r in records if r["kind"] in ("inferred", "assumed")]
    return ReportTables(headline, workloads, engines, [s for s in sections if s.rows], inferred, shown)


def _records(figures: pd.DataFrame) -> list[dict[str, Any]]:
    rows = figures.to_dict("records")
    for row in rows:
        row["caveat_ids"] = list(row.get("caveat_ids") if row.get("caveat_ids") is not None else [])
        row["shot_ids"] = list(row.get("shot_ids") if row.get("shot_ids") is not None else [])
        for key in ("workload", "text_kind", "spec_mode", "which_shot", "source", "note"):
            row[key] = row.get(key) or ""
        for key in ("value", "rest_s", "prompt_tokens"):
            row[key] = None if pd.isna(row.get(key)) else row[key]
        if row["prompt_tokens"] is not None:
            row["prompt_tokens"] = int(row["prompt_tokens"])
    return rows


def _cell_parts(row: dict[str, Any]) -> list[str]:
    """Series label parts after engine and model (the grid cell's remaining axes)."""
    return str(row["series_label"]).split(".")[2:]


def headline_rows(records: list[dict[str, Any]], shown: set[str]) -> list[dict[str, Any]]:
    """Protocol-grid cells (continued real text): one row per cell, one column per timing."""
    metrics = {m for m, *_ in HEADLINE_COLUMNS}
    wanted = [r for r in records if r["protocol"] in ("cold", "warm") and r["metric"] in metrics
              and r["workload"] in ("", BASE_WORKLOAD)]  # fmt: skip
    rows: dict[tuple, dict[str, Any]] = {}
    for r in wanted:
        key = (r["engine"], r["model"], r["series_label"])
        row = rows.setdefault(key, _row_head(r))
        row["cells"][r["metric"]] = r
        shown.add(r["figure_id"])
    return list(rows.values())


def _row_head(r: dict[str, Any]) -> dict[str, Any]:
    parts = _cell_parts(r)
    return {
        "engine": r["engine"],
        "model": r["model"],
        "prompt_tokens": r["prompt_tokens"],
        "protocol": r["protocol"],
        "rest_s": r["rest_s"],
        "series": " ".join(parts[1:]),
        "which_shot": _which_shot_short(r),
        "id_prefix": r["figure_id"].rsplit("/", 1)[0] + "/",
        "cells": {},
    }


def _which_shot_short(r: dict[str, Any], with_protocol: bool = True) -> str:
    """'warm · shots 2-3 · 0 s rest': the row's which-shot words without the timer (each column
    names its own); the figure's full which_shot sentence is in figures.parquet."""
    indices = str(r["shot_indices"]).removeprefix("shots ")
    if r["protocol"] == "cold":
        words = ["shot 1 of each fresh process"]
    else:
        words = [f"shots {indices}"] + ([f"{r['rest_s']:g} s rest"] if r["rest_s"] is not None else [])
    return " · ".join(([r["protocol"]] if with_protocol else []) + words)


def workload_rows(records: list[dict[str, Any]], shown: set[str]) -> list[dict[str, Any]]:
    """Seed 002's table: one row per model x workload x text x protocol x speculative mode."""
    metrics = {m for m, *_ in WORKLOAD_COLUMNS} | {m for m, *_ in CHECKS}
    wanted = [r for r in records if r["workload"] not in ("", BASE_WORKLOAD) and r["metric"] in metrics
              and r["protocol"] in ("cold", "warm")]  # fmt: skip
    rows: dict[tuple, dict[str, Any]] = {}
    for r in wanted:
        key = (r["engine"], r["model"], r["workload"], r["text_kind"], r["protocol"], r["spec_mode"])
        row = rows.setdefault(key, {**_row_head(r), "workload": r["workload"],
                                    "text_kind": r["text_kind"], "spec_mode": r["spec_mode"]})  # fmt: skip
        row["cells"][r["metric"]] = r
        if r["metric"] == "decode_tok_s":
            row["which_shot"] = _which_shot_short(r, with_protocol=False)
        shown.add(r["figure_id"])
    ordered = sorted(rows.values(), key=_workload_order(list(rows)))
    _mark_group_starts(ordered)
    return ordered


def _workload_order(keys: list[tuple]) -> Callable[[dict[str, Any]], tuple]:
    """Config order (first appearance) on every axis; the no-draft mode first in each group."""
    first_seen = [{} for _ in range(6)]
    for key in keys:
        for axis, value in enumerate(key):
            first_seen[axis].setdefault(value, len(first_seen[axis]))
    protocol_rank = {"cold": 0, "warm": 1}

    def order(row: dict[str, Any]) -> tuple:
        values = (row["engine"], row["model"], row["workload"], row["text_kind"])
        ranks = [first_seen[axis][value] for axis, value in enumerate(values)]
        mode = -1 if row["spec_mode"] == NO_DRAFT else first_seen[5][row["spec_mode"]]
        return (*ranks, protocol_rank.get(row["protocol"], 2), mode)

    return order


def _mark_group_starts(rows: list[dict[str, Any]]) -> None:
    previous = None
    for row in rows:
        group = (row["engine"], row["model"], row["workload"], row["text_kind"], row["protocol"])
        row["group_start"] = group != previous
        previous = group


def _is_power_figure(r: dict[str, Any]) -> bool:
    metric = r["metric"]
    return (
        r["protocol"] == "cold vs warm"
        or metric.endswith(("_clock_predicted", "_warm_measured", "_clock_residual", "_warm_cold_ratio"))
        or metric in (OUTLIER_METRIC, "clock_drop_thermal_normal_shots")
        or metric.startswith(("gpu_", "clock_", "energy_", "cpu_"))
    )


def _section(records, shown, key, title, intro, test) -> Section:
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
        hits = round(figure["value"] * n)
        found.append({"figure": figure, "name": name, "meaning": meaning, "hits": hits, "n": n})
    return found
