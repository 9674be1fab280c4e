"""Number formatting shared by the HTML and Markdown reports: one way to write each unit."""

import math
import re
from typing import Any

NOT_MEASURED = "not measured"
KIND_LETTERS = {"measured": "M", "engine-reported": "E", "derived": "D", "inferred": "I", "assumed": "A"}
KIND_WORDS = {
    "measured": "our clock or a sensor",
    "engine-reported": "the engine about itself",
    "derived": "arithmetic on measured or engine-reported values",
    "inferred": "rests on a model of the system",
    "assumed": "a constant we chose",
}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def format_number(value: float | None) -> str:
    """Readable fixed-point numbers; 'not measured' for a missing value, never a guess."""
    if _missing(value):
        return NOT_MEASURED
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:,.1f}"
    if magnitude >= 1:
        return f"{value:,.2f}"
    return f"{value:.3g}"


def format_value(figure: dict[str, Any]) -> str:
    """A figure's value in its unit: fractions as %, ratios as ×, counts and speeds plain."""
    value, unit = figure.get("value"), figure.get("unit", "")
    if _missing(value):
        return NOT_MEASURED
    if unit == "fraction":
        return f"{value * 100:.1f} %"
    if unit == "ratio":
        return f"×{value:.3f}"
    return f"{format_number(value)} {unit}".strip()


COUNT_UNITS = ("shots", "samples", "tokens")


def format_bare(figure: dict[str, Any]) -> str:
    """The value without its unit (the column header names it)."""
    value, unit = figure.get("value"), figure.get("unit", "")
    if _missing(value):
        return NOT_MEASURED
    if unit in COUNT_UNITS and float(value).is_integer():
        return f"{value:,.0f}"
    if unit == "fraction":
        return f"{value * 100:.0f}"
    if unit == "ratio":  # two decimals, or two significant digits for a ratio far below 1
        return f"{value:.2f}" if abs(value) >= 0.1 else f"{value:.2g}"
    return format_number(value)


def format_lossless(figure: dict[str, Any]) -> str:
    """'3/3 identical', '1/3 identical; changed by drafting (token 76, gap 2.1)' or '0/1 identical;
    identical up to near-ties: diverges at a near-tie (token 138, gap 0.066)' (figures.workload_figures'
    note; an older note's 'first diverging token 12' reads 'diverges at token 12')."""
    if _missing(figure.get("value")):
        return NOT_MEASURED
    n = len(figure.get("shot_ids") or [])
    same = round(figure["value"] * n)
    # The note names the shot too; the cell keeps the token, the hover text has the rest.
    where = (figure.get("note") or "").split(" in ")[0].replace("first diverging token", "diverges at token")
    text = f"{same}/{n} identical"
    return text if same == n or not where else f"{text}; {where}"


# Underscores inside words and '#' inside a line are inert in GitHub Markdown; these are not.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*|\[\]<>])")


def md(text: Any) -> str:
    """One Markdown table cell: specials backslash-escaped, HTML brackets as entities, one line."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))
    escaped = escaped.replace("\\<", "&lt;").replace("\\>", "&gt;")
    return " ".join(escaped.split())
