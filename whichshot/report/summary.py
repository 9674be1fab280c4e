"""summary.md: the report's headline tables in Markdown, for pasting into a paper or an issue.

No model output goes in here; every cell is still escaped, since caveat sentences can quote
error text and names come from config."""

import re
from typing import Any

import pandas as pd

from whichshot.figures.caveats.telemetry_rules import ENERGY_UNSTABLE
from whichshot.report.format import KIND_LETTERS, format_bare, format_lossless, format_value
from whichshot.report.tables import (
    CHECKS,
    HEADLINE_COLUMNS,
    LOAD_COLUMNS,
    PER_SIDE,
    SPEEDUP,
    TRACE_MIX_COLUMNS,
    WORKLOAD_COLUMNS,
    SideTable,
    build_tables,
    check_summary,
    energy_verdict,
)

# Underscores inside words and '#' inside a line are inert in GitHub Markdown; these are not.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*|\[\]<>])")


def md(text: Any) -> str:
    """One Markdown table cell: specials backslash-escaped, HTML brackets as entities, one line."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))
    escaped = escaped.replace("\\<", "&lt;").replace("\\>", "&gt;")
    return " ".join(escaped.split())


def _cell(figure: dict[str, Any] | None, numbers: dict[str, int], missing: str = "not measured") -> str:
    if figure is None:
        return missing
    refs = "".join(f" [{numbers[c]}]" for c in figure["caveat_ids"] if c in numbers)
    return f"{md(format_bare(figure))} {KIND_LETTERS[figure['kind']]}{refs}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _headline_cell(row: dict[str, Any], metric: str, numbers: dict[str, int]) -> str:
    """A headline figure; an energy per token with its verdict (never a number without a counter)."""
    figure = row["cells"].get(metric)
    if metric not in ENERGY_UNSTABLE:
        return _cell(figure, numbers)
    if figure is None or figure["value"] is None:
        return "not measured"
    return f"{_cell(figure, numbers)} {md(energy_verdict(figure))}"


def headline_table(rows: list[dict[str, Any]], numbers: dict[str, int]) -> list[str]:
    header = ["engine", "model", "prompt tokens", "series", "which shot"]
    header += [md(f"{title} ({unit})") for _m, title, unit in HEADLINE_COLUMNS]
    body = [
        [
            md(r["engine_on"]),
            md(r["model"]),
            md(r["prompt_tokens_requested"]),
            md(r["series"]),
            md(r["which_shot"]),
        ]
        + [_headline_cell(r, metric, numbers) for metric, *_ in HEADLINE_COLUMNS]
        for r in rows
    ]
    return _table(header, body)


def _workload_cell(row: dict[str, Any], metric: str, numbers: dict[str, int]) -> str:
    """A workload row's figure; a speed-up between cells that did not do the task is set apart."""
    text = _cell(row["cells"].get(metric), numbers, "—")
    if metric == SPEEDUP and row["speedup_set_apart"]:
        return f"✗ ~~{text}~~ (task not done)"
    return text


def workload_table(rows: list[dict[str, Any]], numbers: dict[str, int]) -> list[str]:
    shown = [c for c in WORKLOAD_COLUMNS if c[0] != "lossless_share"]
    header = ["engine", "model", "workload", "text", "protocol", "speculative mode"]
    header += [md(f"{title} ({unit})") for _metric, title, unit in shown]
    header += ["lossless vs none", "checks (shots passing)", "which shot"]
    body = []
    for r in rows:
        cells = [_workload_cell(r, metric, numbers) for metric, *_ in shown]
        lossless = r["cells"].get("lossless_share")
        checks = "; ".join(f"{c['name']} {c['hits']}/{c['n']}" for c in check_summary(r))
        head = [md(r[a]) for a in ("engine_on", "model", "workload", "text_kind", "protocol", "spec_mode")]
        body.append(
            [
                *head,
                *cells,
                md(format_lossless(lossless)) if lossless else "—",
                md(checks) or "—",
                md(r["which_shot"]),
            ]
        )
    return _table(header, body)


def load_table(rows: list[dict[str, Any]], numbers: dict[str, int]) -> list[str]:
    """Seed 000's chunk table and seed 002's streams against capacity, one row per cell."""
    header = ["engine", "model", "prompt", "protocol", "chunk", "streams"]
    header += [md(f"{title} ({unit})") for _metric, title, unit in LOAD_COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for r in rows:
        axes = [md(str(r[a])) for a in ("engine_on", "model", "prompt_tokens_requested", "protocol",
                                         "prefill_chunk_tokens", "parallel_streams")]  # fmt: skip
        lines.append(
            "| "
            + " | ".join(axes + [_cell(r["cells"].get(m), numbers, "—") for m, *_ in LOAD_COLUMNS])
            + " |"
        )
    return lines


def trace_mix_table(rows: list[dict[str, Any]], numbers: dict[str, int]) -> list[str]:
    header = ["engine", "model", "trace", "protocol", "text", "speculative mode"]
    header += [md(f"{title} ({unit})") for _metric, title, unit in TRACE_MIX_COLUMNS]
    body = [
        [md(r[a]) for a in ("engine_on", "model", "trace", "protocol")]
        + [md(r["text_kind"] or "all"), md(r["spec_mode"] or "—")]
        + [_cell(r["cells"].get(metric), numbers, "—") for metric, *_ in TRACE_MIX_COLUMNS]
        for r in rows
    ]
    return _table(header, body)


def side_by_side(table: SideTable, numbers: dict[str, int]) -> list[str]:
    beside = [table.head_axis] if table.head_axis else []
    head_axes = [*beside, "model", "workload", "text_kind", "which_shot", "spec_mode"]
    titles = {"text_kind": "text", "which_shot": "protocol", "spec_mode": "speculative mode"}
    header = [md(titles.get(a, a)) for a in head_axes]
    header += [md(f"{title} ({unit}), {e}") for e in table.sides for _m, title, unit in PER_SIDE]
    header += [
        md(f"{e}: {title} {table.reference} ({unit})")
        for e in table.others
        for _m, title, unit in table.vs_reference
    ]
    body = []
    for r in table.rows:
        cells = [_cell(r["cells"].get((e, m)), numbers, "—") for e in table.sides for m, *_ in PER_SIDE]
        cells += [
            _cell(r["cells"].get((e, m)), numbers, "—") for e in table.others for m, *_ in table.vs_reference
        ]
        body.append([md(r[a]) for a in head_axes] + cells)
    return _table(header, body)


def run_wide(figures: pd.DataFrame, caveats: pd.DataFrame) -> set[str]:
    """Caveats attached to every figure that cites a shot: said once at the top, not in each cell."""
    citing = set(figures.loc[figures["shot_ids"].map(len) > 0, "figure_id"])
    return {c["caveat_id"] for c in caveats.to_dict("records") if citing and citing <= set(c["figure_ids"])}


def render_summary(
    figures: pd.DataFrame, caveats: pd.DataFrame, run_id: str, claims: list[dict[str, Any]] | None = None
) -> str:
    """The Markdown summary of one run (the claims' verdicts first, when claims are configured)."""
    from whichshot.report.claims import claims_markdown  # it uses md from here

    tables = build_tables(figures)
    everywhere = run_wide(figures, caveats)
    all_numbers = {c: n for n, c in enumerate(caveats["caveat_id"], start=1)}
    numbers = {c: n for c, n in all_numbers.items() if c not in everywhere}
    run = tables.run
    counted = f"{format_bare(run)} of {len(run['shot_ids'])} shots ok. " if run else ""
    wide = ", ".join(f"[{all_numbers[c]}]" for c in all_numbers if c in everywhere)
    lines = [
        f"# whichshot summary: {md(run_id)}",
        "",
        counted
        + "Kinds: "
        + ", ".join(f"{v} = {k}" for k, v in KIND_LETTERS.items())
        + ". [n] = caveat n below"
        + (f"; {wide} apply to every figure and are not repeated in the cells" if wide else "")
        + ". Every number is a row of results/figures.parquet.",
        "",
    ]
    if claims:
        lines += [claims_markdown(claims, "Claims: which shot is each published number?")]
    if tables.headline:
        lines += ["## Cold and warm", "", *headline_table(tables.headline, numbers), ""]
    if tables.workloads:
        checks = "; ".join(f"{name} = {meaning}" for _m, name, meaning in CHECKS)
        lines += [
            "## Workloads × speculative modes",
            "",
            *workload_table(tables.workloads, numbers),
            "",
            f"— = does not apply. ✗ = a speed-up between cells where the model did not do the task (its "
            f"task check failed): not the task's speed-up. Checks: {md(checks)}.",
            "",
        ]
    if tables.load:
        lines += [
            "## Prefill chunk and parallel streams",
            "",
            *load_table(tables.load, numbers),
            "",
            "vs largest chunk = prefill speed over the cell with the largest chunk, every other axis equal; "
            "DRAM bytes per prefill are inferred from GPM (not measured without it); decode, all streams = "
            "every stream's tokens over their common decode span.",
            "",
        ]
    if tables.trace_mix:
        lines += [
            "## Your traces: the whole mix",
            "",
            *trace_mix_table(tables.trace_mix, numbers),
            "",
            "Mix speed-up = sum(out / decode tok/s without drafting) / sum(out / decode tok/s with the "
            "mode) over the trace's requests, out = each request's no-draft output tokens; decode time "
            "saved = the difference for one pass. Per-request figures are in the HTML report.",
            "",
        ]
    for table in tables.sides:
        lines += [
            f"## {table.title}",
            "",
            *side_by_side(table, numbers),
            "",
            f"— = not run on that {table.noun} or does not apply. Ratios: this {table.noun} over "
            f"{md(table.reference)}, same cell otherwise.",
            "",
        ]
    if tables.inferred:
        lines += ["## Inferred figures", ""]
        lines += [
            f"- {md(f['figure_id'])} = {md(format_value(f))}: {md(f['formula'])}" for f in tables.inferred
        ]
        lines.append("")
    lines += ["## Caveats", ""]
    fired = [
        f"{n}. **{md(c['caveat_id'])}** ({len(c['figure_ids'])} figures): {md(c['sentence'])}"
        for n, c in enumerate(caveats.to_dict("records"), start=1)
    ]
    lines += fired or ["None fired on this data."]
    return "\n".join(lines) + "\n"
