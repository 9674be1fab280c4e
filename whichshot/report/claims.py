"""The claims' verdicts as a report section (HTML and Markdown), from results/claims.parquet rows, and
as their own small report when checked against an existing run."""

import json
from pathlib import Path
from typing import Any

from whichshot.claims.load import UNITS
from whichshot.claims.run import run_tables, verdicts, write_verdicts
from whichshot.errors import WhichshotError
from whichshot.report.format import md
from whichshot.report.templating import ENV

STATUS_ORDER = (
    "matches",
    "minority match",
    "not reproduced",
    "not comparable here",
    "not covered",
    "not checkable",
)
# Set against this run's figures: shown after the run's results; the rest goes to an appendix.
CHECKED = ("matches", "minority match", "not reproduced")


def claim_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in status order (what matched first), each with its readings decoded, its status shown
    with how many readings matched, and the lead reading's offset from the claim."""
    ordered = sorted(rows, key=lambda r: STATUS_ORDER.index(r["status"]))
    decoded = [{**r, "readings": json.loads(r["readings"] or "[]")} for r in ordered]
    return [
        {
            **r,
            "status_shown": status_shown(r),
            "offset": offset_words(r),
            "tolerance_shown": tolerance_words(r),
        }
        for r in decoded
    ]


def split_claims(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(checked here, the rest): the claim rows set against this run, and those that were not."""
    shown = claim_rows(rows)
    return [r for r in shown if r["status"] in CHECKED], [r for r in shown if r["status"] not in CHECKED]


def status_shown(row: dict[str, Any]) -> str:
    """'minority match (1 of 24 readings)'; the bare status where nothing was compared (or the table
    is from before the counts were kept)."""
    if not row.get("readings_compared"):
        return row["status"]
    return f"{row['status']} ({row['readings_within']} of {row['readings_compared']} readings)"


def lead_reading(row: dict[str, Any]) -> dict[str, Any] | None:
    """The reading a verdict leads with: the first protocol statistic, else the first reading."""
    readings = row["readings"]
    return next((r for r in readings if r.get("statistic")), readings[0] if readings else None)


def offset_words(row: dict[str, Any]) -> str:
    """'ours +15%' (the lead reading against the claim, in the figure's unit); '' where none."""
    lead = lead_reading(row)
    claimed = row["claimed"] * UNITS[row["unit"]][1] if row.get("unit") in UNITS else None
    if lead is None or claimed is None:
        return ""
    if claimed == 0:
        return f"ours {lead['value']:+.3g} (claimed 0)"
    return f"ours {lead['value'] / claimed - 1:+.1%}"


def tolerance_words(row: dict[str, Any]) -> str:
    """'±5%' where the claim has a tolerance; '' otherwise."""
    tolerance = row.get("tolerance")
    return f"±{tolerance:.0%}" if tolerance is not None and tolerance == tolerance else ""


def source_titles(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Each claims source's short name (the citation's first part, 'seed 000') -> its article title,
    where the verdicts carry one."""
    titles = {}
    for r in rows:
        if r.get("source_title"):
            titles.setdefault(source_name(r), r["source_title"])
    return titles


def source_name(row: dict[str, Any]) -> str:
    """'seed 000' of 'seed 000 §3' or 'seed 000, opening': the source a citation names."""
    return row["citation"].split(",")[0].split(" §")[0].strip()


def status_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {status: sum(r["status"] == status for r in rows) for status in STATUS_ORDER}


def claims_markdown(
    rows: list[dict[str, Any]], title: str = "Claims", more: str = "", everything: bool = True
) -> str:
    """The checked claims as a Markdown table, then (with everything) the rest with their verdicts;
    without it the rest are counted only and `more` says where they are listed."""
    checked, rest = split_claims(rows)
    titles = source_titles(rows)
    lines = [f"## {md(title)}", "", counts_line(rows) + (f" {md(more)}" if more else ""), ""]
    lines += [f"- {md(name)}: {md(t)}" for name, t in titles.items()] + ([""] if titles else [])
    if checked:
        lines += [
            "| claim | source | claimed | status | ours vs claimed | tolerance |",
            "|---|---|---|---|---|---|",
        ]
        for r in checked:
            cells = [r["claim_id"], r["citation"], f"{r['claimed']:g} {r['unit']}", r["status_shown"],
                     r["offset"] or "—", r["tolerance_shown"] or "—"]  # fmt: skip
            lines.append("| " + " | ".join(md(cell) for cell in cells) + " |")
    else:
        lines.append("No claim could be set against this run's figures.")
    if everything and rest:
        lines += ["", "Not checked against this run:", "", "| claim | source | claimed | status | why |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for r in rest:
            cells = [r["claim_id"], r["citation"], f"{r['claimed']:g} {r['unit']}", r["status"], r["verdict"]]
            lines.append("| " + " | ".join(md(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def counts_line(rows: list[dict[str, Any]]) -> str:
    counts = status_counts(rows)
    return f"{len(rows)} claims: " + ", ".join(f"{n} {status}" for status, n in counts.items() if n) + "."


def claims_html(rows: list[dict[str, Any]], title: str) -> str:
    checked, rest = split_claims(rows)
    return ENV.get_template("claims_page.html.j2").render(
        title=title, checked=checked, rest=rest, counts=counts_line(rows), sources=source_titles(rows)
    )


def check_existing_run(claim_files: list[str], run: str | None, outputs: dict[str, Path]) -> None:
    """Verdicts against a run already on disk, with their own Markdown and HTML report."""
    if not run:
        raise WhichshotError("claims_check needs the run to check: --config claims_against=PATH")
    if not claim_files:
        raise WhichshotError("claims_check needs claims files: --config 'claims=[claims/seed-000.yaml]'")
    tables = run_tables(Path(run).expanduser())
    rows = verdicts([Path(p) for p in claim_files], tables["figures"], tables["shots"], tables["hardware"])
    write_verdicts(rows, outputs["table"])
    title = f"Claims checked against {run}"
    outputs["markdown"].write_text(claims_markdown(rows, title), encoding="utf-8")
    outputs["html"].write_text(claims_html(rows, title), encoding="utf-8")
