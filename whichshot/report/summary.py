"""summary.md: the report's headline tables in Markdown, for pasting into a paper or an issue.

No model output goes in here; every cell is still escaped, since caveat sentences can quote
error text and names come from config."""

import re
from typing import Any

import pandas as pd

from whichshot.report.answer import answer_block, answer_markdown
from whichshot.report.cells import Cell, Part
from whichshot.report.claims import claims_markdown
from whichshot.report.format import KIND_LETTERS, format_bare, md
from whichshot.report.layout import Column, Table, caveat_numbers, lay_out, run_wide
from whichshot.report.tables import build_tables


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def part_markdown(part: Part, struck: bool = False) -> str:
    """A figure as 'value K [n]' (struck: ~~value K [n]~~); words escaped."""
    if not part.kind:
        return md(part.text)
    refs = "".join(f" [{n}]" for _caveat, n in part.caveats)
    shown = f"{md(part.text)} {KIND_LETTERS[part.kind]}{refs}"
    return f"~~{shown}~~" if struck else shown


def cell_markdown(cell: Cell) -> str:
    """A cell's parts joined by spaces, its lines by '; '; the HTML's id labels left out."""
    lines = (" ".join(part_markdown(p, cell.struck) for p in line if p.look != "id") for line in cell.lines)
    return "; ".join(lines)


def header_markdown(column: Column) -> str:
    """'decode (tok/s)'; a grouped column's group first: 'n2: decode vs n1 (×)'."""
    group = f"{column.group}: " if column.group else ""
    unit = f" ({column.unit})" if column.unit else ""
    return md(f"{group}{column.header}{unit}")


def table_markdown(table: Table) -> list[str]:
    """A report table as summary.md shows it: title, the table (or what stands in its place), its
    legend (its intro is index.html's)."""
    spec = table.spec
    lines = [f"## {md(spec.title)}", ""]
    if not table.rows:
        return [*lines, md(spec.empty), ""]
    header = [header_markdown(c) for c in spec.columns]
    lines += _table(header, [[cell_markdown(c) for c in row.cells] for row in table.rows])
    return [*lines, "", *([md(table.legend), ""] if table.legend else [])]


def first_sentence(text: str, most_chars: int = 200) -> str:
    """A caveat's first sentence (cut at most_chars, marked '…'): the summary's short form, which keeps
    the default run's summary.md within 15 KB (tests/test_report_layout.py)."""
    first = re.split(r"(?<=\.)\s+(?=[A-Z])", str(text), maxsplit=1)[0]
    return first if len(first) <= most_chars else first[: most_chars - 1].rstrip() + "…"


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
    all_numbers = caveat_numbers(caveats, set())
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
    laid_out = lay_out(tables, caveat_numbers(caveats, everywhere))
    for table in laid_out:
        lines += table_markdown(table) if table.spec.in_summary else []
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
