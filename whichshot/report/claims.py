"""The claims' verdicts as a report section (HTML and Markdown), from results/claims.parquet rows."""

import json
from typing import Any

from whichshot.report.summary import md
from whichshot.report.templating import ENV

STATUS_ORDER = ("matches", "not reproduced", "not comparable here", "not covered", "not checkable")


def claim_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in status order (what matched first), each with its readings decoded."""
    ordered = sorted(rows, key=lambda r: STATUS_ORDER.index(r["status"]))
    return [{**r, "readings": json.loads(r["readings"] or "[]")} for r in ordered]


def status_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {status: sum(r["status"] == status for r in rows) for status in STATUS_ORDER}


def claims_markdown(rows: list[dict[str, Any]], title: str = "Claims") -> str:
    lines = [f"## {md(title)}", "", counts_line(rows), "",
             "| claim | source | claimed | status | verdict |", "|---|---|---|---|---|"]  # fmt: skip
    for r in claim_rows(rows):
        claimed = f"{r['claimed']:g} {r['unit']}"
        lines.append(f"| {md(r['claim_id'])} | {md(r['citation'])} | {md(claimed)} | {md(r['status'])} | "
                     f"{md(r['verdict'])} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def counts_line(rows: list[dict[str, Any]]) -> str:
    counts = status_counts(rows)
    return f"{len(rows)} claims: " + ", ".join(f"{n} {status}" for status, n in counts.items() if n) + "."


def claims_html(rows: list[dict[str, Any]], title: str) -> str:
    return ENV.get_template("claims_page.html.j2").render(
        title=title, claims=claim_rows(rows), counts=counts_line(rows)
    )
