"""The engines-side-by-side table: one row per model x case x protocol x speculative mode, one
column group per engine, then each other engine against the reference (the first engine of the
run, as whichshot.engine_comparison chose it). Built from the xengine_* figures only."""

from dataclasses import dataclass, field
from typing import Any

from whichshot.lossless import NO_DRAFT

# (metric, column title, unit): one column of each per engine
PER_ENGINE = (
    ("xengine_decode_tok_s", "decode", "tok/s"),
    ("xengine_prefill_tok_s", "prefill", "tok/s"),
    ("xengine_ttft_s", "TTFT", "s"),
    ("xengine_speedup_vs_none", "speed-up over none", "×"),
    ("xengine_lossless_share", "lossless vs none", "% of shots"),
)
# (metric, column title, unit): one column of each per engine other than the reference
VS_REFERENCE = (
    ("xengine_decode_ratio", "decode vs", "×"),
    ("xengine_prefill_ratio", "prefill vs", "×"),
    ("xengine_same_output_share", "same output as", "% of shots"),
)
METRICS = frozenset(m for m, *_ in PER_ENGINE + VS_REFERENCE)


@dataclass
class EngineTable:
    engines: list[str]
    reference: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def others(self) -> list[str]:
        return [e for e in self.engines if e != self.reference]


def engine_table(records: list[dict[str, Any]], shown: set[str]) -> EngineTable | None:
    """The side-by-side rows; None when the run has no cross-engine figures."""
    wanted = [r for r in records if r["metric"] in METRICS]
    if not wanted:
        return None
    engines = list(dict.fromkeys(r["engine"] for r in wanted))
    reference = _reference(wanted, engines)
    rows: dict[tuple, dict[str, Any]] = {}
    for r in wanted:
        row = rows.setdefault(_row_key(r), _row_head(r))
        row["cells"][(r["engine"], r["metric"])] = r
        shown.add(r["figure_id"])
    ordered = sorted(rows.values(), key=lambda row: (row["order"], row["mode_rank"]))
    previous = None
    for row in ordered:
        row["group_start"] = row["order"] != previous
        previous = row["order"]
    return EngineTable(engines, reference, ordered)


def _reference(figures: list[dict[str, Any]], engines: list[str]) -> str:
    """The engine the ratios are taken against (their note says 'vs <engine>')."""
    for r in figures:
        if r["metric"] == "xengine_decode_ratio" and str(r["note"]).startswith("vs "):
            return r["note"].removeprefix("vs ")
    return engines[0]


def _row_key(r: dict[str, Any]) -> tuple:
    """(model, case, protocol label, context, mode) from '<engine>.<model>.<case>.<protocol>.<ctx>...'."""
    model, case, protocol, ctx = ([*str(r["series_label"]).split(".")[1:5], "", "", "", ""])[:4]
    return (model, case, protocol, ctx, r["spec_mode"])


def _row_head(r: dict[str, Any]) -> dict[str, Any]:
    model, case, protocol, ctx, mode = _row_key(r)
    return {
        "model": model,
        "case": case,
        "protocol": protocol,
        "ctx": ctx,
        "spec_mode": mode,
        "order": (model, case, r["protocol"] != "cold", protocol, ctx),
        "mode_rank": (mode != NO_DRAFT, mode),
        "cells": {},
    }
