"""summary.md: the report's headline tables in Markdown, for pasting into a paper or an issue.

No model output goes in here; every cell is still escaped, since caveat sentences can quote
error text and names come from config."""

import re
from typing import Any

import pandas as pd

from whichshot.figures.caveats.gates import STRUCK_MEANS, gate_words, struck_by
from whichshot.figures.caveats.telemetry_rules import ENERGY_UNSTABLE
from whichshot.figures.metrics import (
    CHECKS,
    HEADLINE_COLUMNS,
    LOAD_COLUMNS,
    PER_SIDE,
    SPEEDUP_MODEL_COLUMNS,
    TRACE_MIX_COLUMNS,
    WORKLOAD_COLUMNS,
)
from whichshot.report.answer import answer_block, answer_markdown
from whichshot.report.claims import claims_markdown
from whichshot.report.format import KIND_LETTERS, format_bare, format_lossless, md
from whichshot.report.tables import SideTable, build_tables, check_summary, energy_verdict


def _cell(figure: dict[str, Any] | None, numbers: dict[str, int], missing: str = "not measured") -> str:
    if figure is None:
        return missing
    refs = "".join(f" [{numbers[c]}]" for c in figure["caveat_ids"] if c in numbers)
    text = f"{md(format_bare(figure))} {KIND_LETTERS[figure['kind']]}{refs}"
    gates = struck_by(figure)  # struck, never shown as a valid figure
    return f"✗ ~~{text}~~ ({md(gate_words(gates))})" if gates else text


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


def workload_table(rows: list[dict[str, Any]], numbers: dict[str, int]) -> list[str]:
    shown = [c for c in WORKLOAD_COLUMNS if c[0] != "lossless_share"]
    header = ["engine", "model", "workload", "text", "protocol", "speculative mode"]
    header += [md(f"{title} ({unit})") for _metric, title, unit in shown]
    header += ["lossless vs none", "checks (shots passing)", "which shot"]
    body = []
    for r in rows:
        cells = [_cell(r["cells"].get(metric), numbers, "—") for metric, *_ in shown]
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


def speedup_model_table(rows: list[dict[str, Any]], numbers: dict[str, int]) -> list[str]:
    """Each drafted cell's measured speed-up beside the cost model's prediction."""
    header = ["model", "workload", "text", "mode"]
    header += [md(f"{title} ({unit})") for _metric, title, unit in SPEEDUP_MODEL_COLUMNS]
    body = [
        [md(r[a]) for a in ("model", "workload", "text_kind", "spec_mode")]
        + [_cell(r["cells"].get(metric), numbers, "—") for metric, *_ in SPEEDUP_MODEL_COLUMNS]
        for r in rows
    ]
    return _table(header, body)


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


def first_sentence(text: str, most_chars: int = 240) -> str:
    """A caveat's first sentence (cut at most_chars, marked '…'): the summary's short form."""
    first = re.split(r"(?<=\.)\s+(?=[A-Z])", str(text), maxsplit=1)[0]
    return first if len(first) <= most_chars else first[: most_chars - 1].rstrip() + "…"


def run_wide(figures: pd.DataFrame, caveats: pd.DataFrame) -> set[str]:
    """Caveats attached to every figure that cites a shot: said once at the top, not in each cell."""
    citing = set(figures.loc[figures["shot_ids"].map(len) > 0, "figure_id"])
    return {c["caveat_id"] for c in caveats.to_dict("records") if citing and citing <= set(c["figure_ids"])}


def _mib(file_bytes: Any) -> str:
    return f"{file_bytes / 2**20:.2f} MiB" if file_bytes else "not recorded"


def _params(count: Any) -> str:
    return (
        f"{count / 1e9:.2f} B"
        if count and count >= 1e9
        else f"{count / 1e6:.2f} M"
        if count
        else "not recorded"
    )


def _build(build: dict[str, Any]) -> str:
    """'llama_cpp 6a7124735dfd (llama-cpp-python 0.3.36, b11312, commit 0c1e57098bba)'."""
    identity = build.get("identity", {})
    facts = [f"{identity.get('package', '')} {identity.get('version', '')}".strip()]
    facts += [f"b{identity['build_number']}"] if identity.get("build_number") else []
    facts += [f"commit {identity['vendored_commit']}"] if identity.get("vendored_commit") else []
    return f"{build['engine']} {build.get('build_id', '')} ({', '.join(f for f in facts if f)})"


def header_lines(run: dict[str, Any] | None, runs: dict[str, list[dict[str, Any]]] | None) -> list[str]:
    """llama-bench's header: what ran (model, size, quant, backend, threads, build) and on which host,
    from the model and build records and the shots' machine columns."""
    run, runs = run or {}, runs or {}
    builds = runs.get("builds") or [{"engine": "not recorded"}]
    threads = "/".join(str(t) for t in run.get("threads", [])) or "not recorded"
    header = ["model", "size", "params", "quant", "backend", "threads", "build"]
    rows = [
        [
            md(
                f"{m['name']} ({m['metadata'].get('architecture', '')} {m['metadata'].get('size_label', '')})"
            ),
            _mib(m["metadata"].get("file_bytes")),
            _params(m["metadata"].get("parameters")),
            md(m["metadata"].get("file_type") or "not recorded"),
            md(b.get("identity", {}).get("backend", "not recorded")),
            threads,
            md(_build(b)),
        ]  # fmt: skip
        for m in runs.get("models", [])
        for b in builds
    ]
    hosts = [_host_line(h) for h in run.get("machines", [])]
    when = [f"shots from {run['started']} to {run['ended']} UTC"] if run.get("started") else []
    return [*_table(header, rows), "", "  \n".join(hosts + when), ""]


def _host_line(machine: dict[str, Any]) -> str:
    """'host: h1 · Intel(R) Xeon(R) Processor · 2 cores · GPU: none recorded (4 series, 54 shots)'."""
    cpu = machine.get("cpu_model") or "CPU not recorded"
    gpu = machine.get("gpu_name") or "none recorded"
    return (
        f"host: {md(machine['hostname'])} · {md(cpu)} · {md(machine.get('cpu_count') or '?')} cores · "
        f"GPU: {md(gpu)} ({machine['series']} series, {machine['shots']} shots)"
    )


def render_summary(
    figures: pd.DataFrame,
    caveats: pd.DataFrame,
    run_id: str,
    claims: list[dict[str, Any]] | None = None,
    where: dict[str, Any] | None = None,
    runs: dict[str, list[dict[str, Any]]] | None = None,
) -> str:
    """The Markdown summary of one run: what ran where (where: render.run_summary's dict; runs: the
    build and model records), its tables, the checked claims and the caveats in short (every claim
    and caveat in full is in index.html)."""
    tables = build_tables(figures)
    everywhere = run_wide(figures, caveats)
    all_numbers = {c: n for n, c in enumerate(caveats["caveat_id"], start=1)}
    numbers = {c: n for c, n in all_numbers.items() if c not in everywhere}
    run = tables.run
    counted = f"{format_bare(run)} of {len(run['shot_ids'])} shots ok. " if run else ""
    wide = ", ".join(f"[{all_numbers[c]}]" for c in all_numbers if c in everywhere)
    lines = [f"# whichshot summary: {md(run_id)}", "", *header_lines(where, runs)]
    lines += answer_markdown(answer_block(figures))  # the answer first
    lines += [
        counted
        + "Kinds: "
        + ", ".join(f"{v} = {k}" for k, v in KIND_LETTERS.items())
        + ". [n] = caveat n below"
        + (f"; {wide} apply to every figure and are not repeated in the cells" if wide else "")
        + ". Every number is a row of results/figures.parquet.",
        "",
    ]
    if tables.headline:
        lines += ["## Cold and warm", "", *headline_table(tables.headline, numbers), ""]
    if tables.workloads:
        checks = "; ".join(f"{name} = {meaning}" for _m, name, meaning in CHECKS)
        lines += [
            "## Workloads × speculative modes",
            "",
            *workload_table(tables.workloads, numbers),
            "",
            f"— = does not apply. ✗ = {md(STRUCK_MEANS)}. Checks: {md(checks)}.",
            "",
        ]
    if tables.speedup_model:
        lines += [
            "## Why drafting gains this much here",
            "",
            *speedup_model_table(tables.speedup_model, numbers),
            "",
            "Predicted = decoded tokens / (plain steps + verification steps × verify cost); verify cost = "
            "this engine's time for a batch of the last token and k drafts over one token, on this machine "
            "(llama-bench at the series' depth). Unexplained = measured / predicted - 1.",
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
    if claims:
        more = "Those not checked here are listed in index.html (appendix)."
        lines += [claims_markdown(claims, "Claims checked against this run", more, everything=False)]
    if tables.inferred:
        lines += [
            f"{len(tables.inferred)} figures are inferred (I): they rest on a model of the system; "
            "index.html lists each with its formula.",
            "",
        ]
    lines += ["## Caveats", ""]
    fired = [
        f"{n}. **{md(c['caveat_id'])}** ({len(c['figure_ids'])} figures): {md(first_sentence(c['sentence']))}"
        for n, c in enumerate(caveats.to_dict("records"), start=1)
    ]
    lines += fired or ["None fired on this data."]
    lines += ["", "Each caveat's full text and the figures it touches are in index.html."] if fired else []
    return "\n".join(lines) + "\n"
