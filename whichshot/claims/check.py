"""A claim against a run's figures: every reading of ours that could be the claimed number (the cold
shot, the warm statistic, each warm shot index, with and without drafting where the claim does not
say), which of them fall within its tolerance, and a verdict in words.

A reading is a figures.parquet row: the verdict cites the figure ids it rests on, so "which shot is
this number?" is answered for the claim as for any figure.
"""

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from whichshot.claims.load import Claim, comparable_units
from whichshot.figures.cells import AXES

UNSTATED = "unstated"


@dataclass(frozen=True)
class Reading:
    label: str  # which shot, in words
    value: float
    figure_ids: tuple[str, ...]
    cell_id: str
    unit: str

    def off_by(self, claimed: float) -> float:
        """ours / claimed - 1 (ours - claimed for a claimed 0)."""
        return self.value - claimed if claimed == 0 else self.value / claimed - 1


def check_claims(
    claims: list[Claim], figures: pd.DataFrame, hardware_names: list[str]
) -> list[dict[str, Any]]:
    """One verdict row per claim (a figure table from before an axis existed has it as null)."""
    per_cell = figures[figures["value"].notna()].copy()
    for axis in AXES:
        if axis not in per_cell:
            per_cell[axis] = None
    return [_verdict_row(claim, per_cell, hardware_names) for claim in claims]


def readings_of(claim: Claim, figures: pd.DataFrame) -> list[Reading]:
    if claim.is_ratio:
        return _ratio_readings(claim, figures)
    return [_reading(row) for row in _matching(figures, claim.metric, claim.where).to_dict("records")]


def _matching(figures: pd.DataFrame, metric: str, where: dict[str, Any], per_cell_only: bool = False):
    rows = figures[figures["metric"] == metric]
    if per_cell_only:
        rows = rows[rows["shot_index"].isna()]
    for axis, value in where.items():
        rows = rows.loc[rows[axis].map(lambda v, want=value: _same(v, want)).astype(bool)]
    return rows


def _same(value: Any, wanted: Any) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if isinstance(wanted, (int, float)) and not isinstance(wanted, bool):
        try:
            return float(value) == float(wanted)
        except (TypeError, ValueError):
            return False
    return str(value) == str(wanted)


def _reading(row: dict[str, Any]) -> Reading:
    return Reading(_label(row), float(row["value"]), (row["figure_id"],), row["cell_id"], row["unit"])


def _label(row: dict[str, Any]) -> str:
    """'smollm2 p1024: warm shot 3', 'qwen explain/real: cold shot 1 (each fresh process), ngram'."""
    mode = f", {row['spec_mode']}" if _present(row.get("spec_mode")) and row["spec_mode"] != "none" else ""
    index = row.get("shot_index")
    if _present(index):
        which = f"{row['protocol']} shot {int(index)}"
    elif row.get("protocol") == "cold":
        which = "cold shot 1 (each fresh process)"
    elif row.get("protocol") == "warm":
        which = f"warm statistic (shots {row['shot_indices'] or '-'})"
    else:
        which = "the run"
    return f"{_cell_words(row)}: {which}{mode}"


def _cell_words(row: dict[str, Any]) -> str:
    words = [str(row["model"])] if _present(row.get("model")) else []
    if _present(row.get("node_requested")):
        words.append(f"on {row['node_requested']}")
    workload = row.get("workload")
    if _present(workload) and workload != "continue_text":
        words.append(f"{workload}/{row['text_kind']}")
    if _present(row.get("prompt_tokens_requested")) and workload == "continue_text":
        words.append(f"p{int(row['prompt_tokens_requested'])}")
    return " ".join(words) or "run"


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _ratio_readings(claim: Claim, figures: pd.DataFrame) -> list[Reading]:
    top, bottom = claim.numerator, claim.denominator
    named = set(top.get("where", {})) | set(bottom.get("where", {}))
    paired_on = [a for a in AXES if a not in named]
    bottoms = _matching(figures, bottom["metric"], bottom.get("where", {}), per_cell_only=True)
    by_key = {tuple(str(r[a]) for a in paired_on): r for r in bottoms.to_dict("records")}
    found = []
    for row in _matching(figures, top["metric"], top.get("where", {}), per_cell_only=True).to_dict("records"):
        other = by_key.get(tuple(str(row[a]) for a in paired_on))
        if other is None or not other["value"]:
            continue
        found.append(
            Reading(
                f"{_label(row)} / {_label(other)}",
                float(row["value"]) / float(other["value"]),
                (row["figure_id"], other["figure_id"]),
                f"{row['cell_id']} / {other['cell_id']}",
                "ratio",
            )
        )
    return found


def hardware_differs(claim: Claim, hardware_names: list[str]) -> str | None:
    """Why an absolute claim cannot be set against this run's hardware (None: it can)."""
    stated = str(claim.stated.get("hardware", UNSTATED))
    if stated == UNSTATED or not hardware_names:
        return None
    if any(_key(name) in _key(stated) or _key(stated) in _key(name) for name in hardware_names if name):
        return None
    return f"stated hardware {stated!r} is not this run's ({'; '.join(n for n in hardware_names if n)})"


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _verdict_row(claim: Claim, figures: pd.DataFrame, hardware_names: list[str]) -> dict[str, Any]:
    readings = readings_of(claim, figures) if claim.checkable != "no" else []
    status, words = _verdict(claim, readings, hardware_names)
    within = [r for r in readings if claim.holds(r.value)]
    return {
        "claim_id": claim.claim_id,
        "file": claim.file,
        "citation": claim.citation,
        "quote": claim.quote,
        "metric": claim.metric,
        "claimed": claim.value_as_stated,
        "unit": claim.unit,
        "tolerance": claim.tolerance,
        "checkable": claim.checkable,
        "status": status,
        "verdict": words,
        "readings": json.dumps([r.__dict__ | {"within": r in within} for r in readings], ensure_ascii=False),
        "figure_ids": sorted({i for r in readings for i in r.figure_ids}),
        "readings_within": len(within) if status in ("matches", "not reproduced") else 0,
    }


def _verdict(claim: Claim, readings: list[Reading], hardware_names: list[str]) -> tuple[str, str]:
    if claim.checkable == "no":
        return "not checkable", claim.why or "the claim names nothing this project measures"
    differs = hardware_differs(claim, hardware_names) if claim.checkable == "here" else None
    if differs:
        return "not comparable here", f"not comparable here: {differs}; only relative claims are checked"
    if not readings:
        where = claim.where or {"numerator": claim.numerator, "denominator": claim.denominator}
        return (
            "not covered",
            f"not covered by this run: no {claim.metric} figure for {where}. {claim.why}".strip(),
        )
    if not all(comparable_units(claim.unit, r.unit) for r in readings):
        return (
            "not comparable here",
            f"not comparable here: the claim is in {claim.unit}, our figures in {readings[0].unit}",
        )
    within = [r for r in readings if claim.holds(r.value)]
    if within:
        return "matches", _matches_words(claim, within, readings)
    return "not reproduced", _not_reproduced_words(claim, readings)


def _percent(off: float) -> str:
    return f"{abs(off):.0%} {'higher' if off > 0 else 'lower'}"


def _matches_words(claim: Claim, within: list[Reading], readings: list[Reading]) -> str:
    named = "; ".join(f"{r.label} = {r.value:.4g}" for r in within[:3])
    more = f" and {len(within) - 3} more" if len(within) > 3 else ""
    words = f"matches {named}{more} (claimed {claim.value:.4g}, tolerance {claim.tolerance:.0%})"
    contrast = _contrast(within, readings)
    if contrast is not None:
        words += f"; our {contrast.label} is {_percent(contrast.off_by(claim.value))} than the claim"
    return words


def _contrast(within: list[Reading], readings: list[Reading]) -> Reading | None:
    """The other kind of shot of the first match's cell (warm where a cold one matched, else cold)."""
    cell, which = within[0].label.split(": ", 1)
    wanted = f"{cell}: " + ("warm statistic" if which.startswith("cold") else "cold shot 1")
    return next((r for r in readings if r not in within and r.label.startswith(wanted)), None)


def _span(small: float, large: float) -> str:
    return f"{small:.0%}" if f"{small:.0%}" == f"{large:.0%}" else f"{small:.0%} to {large:.0%}"


def _not_reproduced_words(claim: Claim, readings: list[Reading]) -> str:
    offs = sorted(r.off_by(claim.value) for r in readings)
    low, high = offs[0], offs[-1]
    if claim.value == 0:
        ends = f"{low:+.3g}" if f"{low:+.3g}" == f"{high:+.3g}" else f"{low:+.3g} to {high:+.3g}"
        spread = f"ours is {ends} (claimed 0)"
    elif high < 0:
        spread = f"ours is {_span(abs(high), abs(low))} lower"
    elif low > 0:
        spread = f"ours is {_span(low, high)} higher"
    else:
        spread = f"ours is {abs(low):.0%} lower to {high:.0%} higher"
    closest = min(readings, key=lambda r: abs(r.off_by(claim.value)))
    return (
        f"not reproduced: {spread} under every reading ({len(readings)}); closest {closest.label} = "
        f"{closest.value:.4g} against claimed {claim.value:.4g}"
    )
