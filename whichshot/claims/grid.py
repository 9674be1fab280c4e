"""The cells claims need: with claims_extend_grid, a claim whose `where` names an axis value the grid
lacks (a 3 s rest, a reversed order, a 16384-token window, a workload) adds that value to the grid,
so the run measures what the claim is about instead of answering "not covered"."""

import copy
from typing import Any

from whichshot.claims.load import Claim
from whichshot.shots.axes import BASE_WORKLOAD, TRACE_WORKLOAD

# claim axis -> (config section, list key) of the protocol grid (continue_text cells) ...
_PROTOCOL_AXES = {
    "rest_s": ("protocol", "rests_s"),
    "order": ("protocol", "orders"),
    "context_tokens_requested": ("protocol", "context_tokens"),
    "precondition_s": ("protocol", "precondition_s"),
    "prompt_tokens_requested": ("prompts", "lengths"),
}
# ... and of the workloads.
_WORKLOAD_AXES = {"workload": ("workloads", "names"), "text_kind": ("workloads", "text_kinds")}


def wheres(claim: Claim) -> list[dict[str, Any]]:
    """Every cell selection a claim makes (its own, or each side of a ratio)."""
    if claim.checkable == "no":
        return []
    sides = [claim.numerator, claim.denominator] if claim.is_ratio else [{"where": claim.where}]
    return [side.get("where", {}) for side in sides if side]


def extend_grid(config: dict[str, Any], claims: list[Claim]) -> tuple[dict[str, Any], list[str]]:
    """The config with every axis value the claims name added (after the configured ones), and
    what was added, in words."""
    extended, added = copy.deepcopy(config), []
    for claim in claims:
        for where in wheres(claim):
            protocol_grid = where.get("workload", BASE_WORKLOAD) == BASE_WORKLOAD
            axes = _PROTOCOL_AXES if protocol_grid else _WORKLOAD_AXES
            for axis, value in where.items():
                if axis in axes and not (axis == "workload" and value in (BASE_WORKLOAD, TRACE_WORKLOAD)):
                    added += _add(extended, axes[axis], value, claim.claim_id)
    return extended, added


def _add(config: dict[str, Any], place: tuple[str, str], value: Any, claim_id: str) -> list[str]:
    section, key = place
    values = config[section].setdefault(key, [])
    if value in values:
        return []
    values.append(value)
    return [f"{section}.{key} += {value!r} (claim {claim_id})"]
