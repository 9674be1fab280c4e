"""A claim against a run's figures: every reading of ours that could be the claimed number (the cold
shot, the warm statistic, each warm shot index, with and without drafting where the claim does not
say), which of them fall within its tolerance, and a verdict in words: how many readings were compared
and how many matched, led by the protocol statistic (the cell's cold or warm figure, not the best of
all its shot indices). A claim that a protocol statistic matches says which first ("matches the cold
shot", "matches the warm statistic"); a "minority match" is one that no protocol statistic matches,
only some single shot index (or, without statistics among the readings, fewer than half of them).

A reading is a figures.parquet row: the verdict cites the figure ids it rests on, so "which shot is
this number?" is answered for the claim as for any figure. A reading resting on a gated-out figure
(caveats.gates: task gate failed, or lossy) is listed but never compared, and the verdict says why; a
claim whose figure has no value because what it rests on is not measured here (a nominal clock) is
not comparable here, in the figure's words.
"""

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from whichshot.claims.load import Claim, comparable_units
from whichshot.figures.caveats.gates import NOT_CHECKABLE_HERE, gate_words, gated_out
from whichshot.figures.statistic import EVERY_SHOT
from whichshot.shots.axes import AXES

UNSTATED = "unstated"
COMPARED = ("matches", "minority match", "not reproduced")  # the statuses whose readings were compared
LISTED = 3  # readings named in a verdict before "and N more"


@dataclass(frozen=True)
class Reading:
    label: str  # which shot, in words
    value: float
    figure_ids: tuple[str, ...]
    cell_id: str
    unit: str
    statistic: bool  # the cell's protocol statistic (cold or warm figure), not one shot index of it
    gated: str = ""  # why the reading is not compared (caveats.gates), "" where it is
    statistic_name: str = ""  # "the cold shot", "the warm statistic", ... ("" for a shot index)

    def off_by(self, claimed: float) -> float:
        """ours / claimed - 1 (ours - claimed for a claimed 0)."""
        return self.value - claimed if claimed == 0 else self.value / claimed - 1


def check_claims(
    claims: list[Claim], figures: pd.DataFrame, hardware_names: list[str]
) -> list[dict[str, Any]]:
    """One verdict row per claim (a figure table from before an axis existed has it as null)."""
    figures = figures.copy()
    for axis in AXES:
        if axis not in figures:
            figures[axis] = None
    per_cell = figures[figures["value"].notna()]
    notes = (
        figures["note"].fillna("").astype(str) if "note" in figures else pd.Series("", index=figures.index)
    )
    unchecked = figures[figures["value"].isna() & notes.str.startswith(NOT_CHECKABLE_HERE)]
    return [_verdict_row(claim, per_cell, hardware_names, unchecked) for claim in claims]


def readings_of(claim: Claim, figures: pd.DataFrame) -> list[Reading]:
    """Every reading that could be the claim's, the protocol statistics first."""
    if claim.is_ratio:
        return _ratio_readings(claim, figures)
    found = [_reading(row) for row in _matching(figures, claim.metric, claim.where).to_dict("records")]
    return sorted(found, key=lambda r: not r.statistic)


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
    statistic = not _present(row.get("shot_index"))
    gated = gate_words(gated_out(row))
    return Reading(_label(row), float(row["value"]), (row["figure_id"],), row["cell_id"], row["unit"],
                   statistic, gated, _statistic_name(row) if statistic else "")  # fmt: skip


def _statistic_name(row: dict[str, Any]) -> str:
    """Which protocol statistic a per-cell figure is, in words."""
    if str(row.get("which_shot") or "").startswith(EVERY_SHOT):
        return "every ok shot"
    return {"cold": "the cold shot", "warm": "the warm statistic"}.get(
        row.get("protocol"), "the run's figure"
    )


def _label(row: dict[str, Any]) -> str:
    """'smollm2 p1024: warm shot 3', 'qwen explain/real: cold shot 1 (each fresh process), ngram'."""
    mode = f", {row['spec_mode']}" if _present(row.get("spec_mode")) and row["spec_mode"] != "none" else ""
    index = row.get("shot_index")
    if _present(index):
        which = f"{row['protocol']} shot {int(index)}"
    elif str(row.get("which_shot") or "").startswith(EVERY_SHOT):
        which = f"every ok shot (shots {row['shot_indices'] or '-'})"
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
                statistic=True,
                gated=gate_words(gated_out(row) or gated_out(other)),
                statistic_name=f"{_statistic_name(row)} over {_statistic_name(other)}",
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


def _verdict_row(
    claim: Claim, figures: pd.DataFrame, hardware_names: list[str], unchecked: pd.DataFrame | None = None
) -> dict[str, Any]:
    readings = readings_of(claim, figures) if claim.checkable != "no" else []
    status, words = _verdict(claim, readings, hardware_names, unchecked)
    compared = [r for r in readings if not r.gated] if status in COMPARED else []
    within = [r for r in compared if claim.holds(r.value)]
    return {
        "claim_id": claim.claim_id,
        "file": claim.file,
        "source_title": claim.source_title,
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
        "readings_compared": len(compared),
        "readings_within": len(within),
        "statistics_compared": sum(r.statistic for r in compared),
        "statistics_within": sum(r.statistic for r in within),
    }


def _verdict(
    claim: Claim, readings: list[Reading], hardware_names: list[str], unchecked: pd.DataFrame | None = None
) -> tuple[str, str]:
    if claim.checkable == "no":
        return "not checkable", claim.why or "the claim names nothing this project measures"
    differs = hardware_differs(claim, hardware_names) if claim.checkable == "here" else None
    if differs:
        return "not comparable here", f"not comparable here: {differs}; only relative claims are checked"
    if not readings and (why := _not_checkable_here(claim, unchecked)):
        return "not comparable here", f"not comparable here: {why}"
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
    usable = [r for r in readings if not r.gated]
    gated = [r for r in readings if r.gated]
    if not usable:
        return (
            "not comparable here",
            f"not comparable here: every reading is gated out, none compared; {_gated_words(gated)}",
        )
    status, words = _compared(claim, usable)
    return status, f"{words}; {_gated_words(gated)}" if gated else words


def _gated_words(gated: list[Reading]) -> str:
    named = _listed([f"{r.label} ({r.gated})" for r in gated])
    return f"{len(gated)} reading(s) not compared: {named}"


def _not_checkable_here(claim: Claim, unchecked: pd.DataFrame | None) -> str:
    """The note of a figure the claim would read that has no value because what it rests on is not
    measured here ('' where there is none)."""
    if unchecked is None or unchecked.empty:
        return ""
    wanted = (
        [claim.numerator, claim.denominator]
        if claim.is_ratio
        else [{"metric": claim.metric, "where": claim.where}]
    )
    for side in wanted:
        rows = _matching(unchecked, side["metric"], side.get("where", {}))
        if len(rows):
            return str(rows.iloc[0]["note"])
    return ""


def _compared(claim: Claim, readings: list[Reading]) -> tuple[str, str]:
    """matches (led by the protocol statistic that matches), minority match (no protocol statistic
    matches, only shot-index readings) or not reproduced, in words that lead with the statistic."""
    within = [r for r in readings if claim.holds(r.value)]
    tolerance = f"claimed {claim.value:.4g}, tolerance {claim.tolerance:.0%}"
    head = (
        f"{len(within)} of {len(readings)} readings within ({tolerance}); {_statistic_words(claim, readings)}"
    )
    if not within:
        spread = f"; {_not_reproduced_words(claim, readings)}" if len(readings) > 1 else ""
        return "not reproduced", f"not reproduced: {head}{spread}"
    others = _listed([f"{r.label} = {r.value:.4g}" for r in within if not r.statistic])
    tail = f"; other readings within: {others}" if others else ""
    matched = list(dict.fromkeys(r.statistic_name for r in within if r.statistic))
    if matched:
        return "matches", f"matches {' and '.join(matched)}: {head}{tail}"
    if any(r.statistic for r in readings):
        return "minority match", f"minority match: no protocol statistic matches, only {head}{tail}"
    if 2 * len(within) < len(readings):
        return "minority match", f"minority match: only {head}{tail}"
    return "matches", f"matches: {head}{tail}"


def _statistic_words(claim: Claim, readings: list[Reading]) -> str:
    """The protocol statistics, each with how far it is from the claim."""
    statistics = [r for r in readings if r.statistic]
    if not statistics:
        return "no protocol statistic among them (shot-index readings only)"
    named = _listed([f"{r.label} = {r.value:.4g} ({_against(claim, r)})" for r in statistics])
    if len(statistics) == 1:
        return f"protocol statistic: {named}"
    held = sum(claim.holds(r.value) for r in statistics)
    return f"protocol statistics, {held} of {len(statistics)} within: {named}"


def _against(claim: Claim, reading: Reading) -> str:
    if claim.holds(reading.value):
        return "within"
    off = reading.off_by(claim.value)
    return f"{off:+.3g} against 0" if claim.value == 0 else _percent(off)


def _listed(items: list[str]) -> str:
    more = f" and {len(items) - LISTED} more" if len(items) > LISTED else ""
    return "; ".join(items[:LISTED]) + more


def _percent(off: float) -> str:
    return f"{abs(off):.0%} {'higher' if off > 0 else 'lower'}"


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
    return f"{spread} under every reading; closest {closest.label} = {closest.value:.4g}"
