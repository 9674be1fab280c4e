"""Per-shot quality columns: copy from the prompt, self-repetition and loops, the workload's own
checks (needle, edit, recall, code) and its task gate."""

from typing import Any

from whichshot.shots import quality as q
from whichshot.shots.task_gates import gate_fields

COPY_SPAN_TOKENS = 8  # k: an output token counts as copied when it lies in a >= k-token span of the prompt


def quality_fields(
    ids: list[int], text: str | None, prompt_ids: list[int], prompt: dict[str, Any]
) -> dict[str, Any]:
    """What can be checked about an output (its token ids and text) without another shot (lossless
    needs the no-draft one)."""
    fields: dict[str, Any] = {
        "copy_fraction": q.copy_fraction(ids, prompt_ids, COPY_SPAN_TOKENS),
        "copy_span_tokens": COPY_SPAN_TOKENS,
        **repetition_fields(ids),
        "prompt_self_repetition": prompt.get("self_repetition"),
        **check_fields(text or "", prompt.get("checks", {})),
    }
    return {**fields, **gate_fields(prompt.get("workload"), fields)}


def repetition_fields(ids: list[int]) -> dict[str, Any]:
    """How much of the output repeats its own earlier spans, and whether it ends in a loop."""
    period = q.loop_period(ids)
    return {
        "self_repetition": q.self_repetition(ids, COPY_SPAN_TOKENS),
        "loop_detected": period is not None if ids else None,
        "loop_period_tokens": period,
    }


def check_fields(text: str, checks: dict[str, Any]) -> dict[str, Any]:
    """The workload's own checks on the output text (None where the workload has none)."""
    fields: dict[str, Any] = dict.fromkeys(
        ("needle_found", "edit_made", "edit_intact", "recall_exact", "recall_similarity", "code_parses")
    )
    if "needle" in checks:
        fields["needle_found"] = q.needle_found(text, checks["needle"])
    if "rename" in checks:
        rename = checks["rename"]
        fields["edit_made"] = bool(q.rename_applied(text, rename["old"], rename["new"])["renamed"])
        fields["edit_intact"] = q.rest_intact(text, rename["file"], rename["old"], rename["new"])
    if "reference_text" in checks:
        fields["recall_exact"] = q.contains_verbatim(text, checks["reference_text"])
        fields["recall_similarity"] = q.recall_similarity(text, checks["reference_text"])
    if checks.get("python_code"):
        fields["code_parses"] = q.python_parses(text)
    return fields
