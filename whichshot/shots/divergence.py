"""Where a drafted output parts from the undrafted one: a near-tie the evaluation path flipped, or a
change drafting made (issue 50), from the target's own log-probabilities (measure.divergence_probe).

The threshold is measured on the run: at each probed position, how far the batched path moves the
gap between two of the target's competing candidates against the one-token path (the range, over the
candidates at least as likely as the less likely token at issue, of their log-probability's move,
batched minus one-token); the largest such move of the run is how much the evaluation path alone can
shift a gap. A divergence whose one-token gap
between the undrafted and the drafted token is within it is a near-tie: the path, not a draft, can
decide it. Anything else (a larger gap, a drafted token outside the target's top candidates) is a
change made by drafting."""

import math
from typing import Any

IDENTICAL, NEAR_TIE, CHANGED, NOT_MEASURED = "identical", "near_tie", "changed", "not_measured"
# The words the report uses for each outcome (a near-tie's and a change's with their token and gap).
OUTCOME_WORDS = {
    IDENTICAL: "identical",
    NEAR_TIE: "identical up to near-ties",
    CHANGED: "changed by drafting",
    NOT_MEASURED: "diverges (margin not measured)",
}
DIVERGENCE_COLUMNS = (
    "divergence_outcome", "divergence_undrafted_token", "divergence_drafted_token", "divergence_gap_logprob",
    "divergence_batched_gap_logprob", "divergence_drafted_rank", "divergence_path_spread_logprob",
    "near_tie_threshold_logprob", "divergence_prefix_repeated", "divergence_not_measured_because",
)  # fmt: skip
NO_PROBE = "no divergence probe ran for this series"


def _as_dict(pairs: list[list[float]]) -> dict[int, float]:
    return {int(token): float(logprob) for token, logprob in pairs}


def path_spread(entry: dict[str, Any]) -> float | None:
    """How far the batched path moved a gap between two competing candidates at this position: the
    range of (batched - one-token) log-probability over the tokens in both lists that the one-token
    path finds at least as likely as the less likely of the two tokens at issue (the tail of unlikely
    candidates moves more and decides nothing; None: fewer than two such tokens)."""
    one, batch = _as_dict(entry["one_token"]), _as_dict(entry["batched"])
    at_issue = [one[t] for t in (entry["undrafted_token"], entry["drafted_token"]) if t in one]
    floor = min(at_issue, default=-math.inf)
    moves = [batch[t] - one[t] for t in one.keys() & batch.keys() if one[t] >= floor]
    return max(moves) - min(moves) if len(moves) >= 2 else None


def near_tie_threshold(entries: list[dict[str, Any]]) -> float | None:
    """The run's threshold: the largest path spread over its probed positions (None: none measured)."""
    spreads = [s for s in map(path_spread, entries) if s is not None]
    return max(spreads) if spreads else None


def _gap(top: dict[int, float], undrafted: int, drafted: int) -> float | None:
    if undrafted not in top or drafted not in top:
        return None
    return top[undrafted] - top[drafted]


def drafted_rank(entry: dict[str, Any]) -> int | None:
    """The drafted token's rank (1 = most likely) among the one-token path's candidates; None: not
    among them."""
    ranked = [int(token) for token, _lp in sorted(entry["one_token"], key=lambda pair: -pair[1])]
    drafted = entry["drafted_token"]
    return ranked.index(drafted) + 1 if drafted in ranked else None


def classify(entry: dict[str, Any] | None, threshold: float | None) -> str:
    """NEAR_TIE where the one-token gap between the undrafted and the drafted token is within the
    threshold, CHANGED where it is not (or the drafted token is not among the candidates),
    NOT_MEASURED without a probe entry or a threshold."""
    if entry is None or threshold is None:
        return NOT_MEASURED
    gap = _gap(_as_dict(entry["one_token"]), entry["undrafted_token"], entry["drafted_token"])
    return NEAR_TIE if gap is not None and abs(gap) <= threshold else CHANGED


def divergence_fields(
    lossless: bool | None,
    entry: dict[str, Any] | None,
    threshold: float | None,
    probe_note: str | None = None,
) -> dict[str, Any]:
    """The divergence columns of a drafted shot: identical, or its divergence's outcome and margin
    (None everywhere for a shot not compared); probe_note: why its series' probe gave no margin (its
    not_run or error), where it gave none."""
    fields: dict[str, Any] = dict.fromkeys(DIVERGENCE_COLUMNS)
    if lossless is None:
        return fields
    fields["near_tie_threshold_logprob"] = threshold
    if lossless:
        return {**fields, "divergence_outcome": IDENTICAL}
    fields["divergence_outcome"] = classify(entry, threshold)
    if entry is None:
        return {**fields, "divergence_not_measured_because": probe_note or NO_PROBE}
    undrafted, drafted = entry["undrafted_token"], entry["drafted_token"]
    return {
        **fields,
        "divergence_undrafted_token": undrafted,
        "divergence_drafted_token": drafted,
        "divergence_gap_logprob": _gap(_as_dict(entry["one_token"]), undrafted, drafted),
        "divergence_batched_gap_logprob": _gap(_as_dict(entry["batched"]), undrafted, drafted),
        "divergence_drafted_rank": drafted_rank(entry),
        "divergence_path_spread_logprob": path_spread(entry),
        "divergence_prefix_repeated": entry.get("prefix_repeated"),
    }


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def outcome_text(row: dict[str, Any]) -> str:
    """'identical', 'diverges at a near-tie (token 138, gap 0.066)', 'changed by drafting (token 76,
    gap 2.1)', 'diverges (token 12; margin not measured)' for one shot's columns ('' for a shot not
    compared)."""
    outcome, token = row.get("divergence_outcome"), row.get("first_divergence_token")
    if _missing(token):
        return OUTCOME_WORDS[IDENTICAL] if outcome == IDENTICAL else ""
    where = f"token {int(token)}"
    gap = row.get("divergence_gap_logprob")
    if not _missing(gap):
        where += f", gap {abs(gap):.3g}"
    if outcome == NEAR_TIE:
        return f"diverges at a near-tie ({where})"
    if outcome == CHANGED:
        return f"changed by drafting ({where})"
    return f"diverges ({where}; margin not measured)"
