"""Did the model do the task? One gate per workload, over the shot's quality columns.

A speed measured on an output that is not the task (a loop, an edit never made) is not that task's
speed: the figures keep it, and the task_not_done caveat follows every figure that cites it.
"""

from typing import Any

RECALL_NEAR_EXACT = 0.95  # recall passes near-exact when this share of its words come back in order
EXPLAIN_REPETITION_LIMIT = 0.5  # explain fails when more of its tokens repeat its own earlier spans

GATES = {
    "edit_file": "the rename is made (def of the new name, none of the old) and every other line of "
    "the file comes back unchanged",
    "verbatim_recall": "the document comes back verbatim (whitespace-normalised) or near-exact: at "
    f"least {RECALL_NEAR_EXACT:.0%} of its words in order (recall_similarity)",
    "needle": "the planted passphrase is in the answer",
    "new_code": "the code parses as Python 3 and the output is not a degenerate loop",
    "explain": "the output is not a degenerate loop and at most "
    f"{EXPLAIN_REPETITION_LIMIT:.0%} of its tokens repeat its own earlier spans",
}


def task_done(workload: str, quality: dict[str, Any]) -> bool | None:
    """The workload's gate over one shot's quality columns; None where the workload has no task
    (continue_text) or a column the gate needs was not checked."""
    gate = _GATE_CHECKS.get(workload)
    if gate is None:
        return None
    try:
        return bool(gate(quality))
    except _NotChecked:
        return None


class _NotChecked(Exception):
    pass


def _needed(quality: dict[str, Any], column: str) -> Any:
    value = quality.get(column)
    if value is None or value != value:  # None or NaN: the check did not run
        raise _NotChecked(column)
    return value


def _edit(q: dict[str, Any]) -> bool:
    return _needed(q, "edit_made") and _needed(q, "edit_intact")


def _recall(q: dict[str, Any]) -> bool:
    return _needed(q, "recall_exact") or _needed(q, "recall_similarity") >= RECALL_NEAR_EXACT


def _needle(q: dict[str, Any]) -> bool:
    return _needed(q, "needle_found")


def _new_code(q: dict[str, Any]) -> bool:
    return _needed(q, "code_parses") and not _needed(q, "loop_detected")


def _explain(q: dict[str, Any]) -> bool:
    return not _needed(q, "loop_detected") and _needed(q, "self_repetition") <= EXPLAIN_REPETITION_LIMIT


_GATE_CHECKS = {
    "edit_file": _edit,
    "verbatim_recall": _recall,
    "needle": _needle,
    "new_code": _new_code,
    "explain": _explain,
}
