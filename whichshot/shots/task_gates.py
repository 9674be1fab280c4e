"""Did the model do the task? One gate per workload, over the shot's quality columns.

A speed measured on an output that is not the task (a loop, an edit never made) is not that task's
speed: the figures keep it, and the task_not_done caveat follows every figure that cites it.
"""

from typing import Any

RECALL_NEAR_EXACT = 0.95  # recall passes near-exact when this share of its words come back in order
EXPLAIN_REPETITION_LIMIT = 0.5  # explain fails when more of its tokens repeat its own earlier spans


def gate_fields(workload: str, quality: dict[str, Any]) -> dict[str, Any]:
    """task_gate (what the workload's gate checks, in words) and task_done (the gate over one shot's
    quality columns); both None where the workload has no task (continue_text), task_done None
    where a column the gate needs was not checked."""
    gate = _GATES.get(workload)
    if gate is None:
        return {"task_gate": None, "task_done": None}
    words, check = gate
    try:
        done = bool(check(quality))
    except _NotChecked:
        done = None
    return {"task_gate": words, "task_done": done}


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


# workload -> (what its gate checks, in words; the check)
_GATES = {
    "edit_file": (
        "the rename is made (def of the new name, none of the old) and every other line of the file comes "
        "back unchanged",
        _edit,
    ),
    "verbatim_recall": (
        "the document comes back verbatim (whitespace-normalised) or near-exact: at least "
        f"{RECALL_NEAR_EXACT:.0%} of its words in order (recall_similarity)",
        _recall,
    ),
    "needle": ("the planted passphrase is in the answer", _needle),
    "new_code": ("the code parses as Python 3 and the output is not a degenerate loop", _new_code),
    "explain": (
        "the output is not a degenerate loop and at most "
        f"{EXPLAIN_REPETITION_LIMIT:.0%} of its tokens repeat its own earlier spans",
        _explain,
    ),
}
