"""Per-shot quality columns: copy fraction, needle, edit, verbatim recall."""

from typing import Any

from whichshot.engines.base import ShotOutcome
from whichshot.measure.quality import contains_verbatim, copy_fraction, needle_found, rename_applied

COPY_SPAN_TOKENS = 8  # k: an output token counts as copied when it lies in a >= k-token span of the prompt


def quality_fields(outcome: ShotOutcome, prompt_ids: list[int], prompt: dict[str, Any]) -> dict[str, Any]:
    """What can be checked about this output without another shot (lossless needs the no-draft one)."""
    checks = prompt.get("checks", {})
    text = outcome.output_text or ""
    fields: dict[str, Any] = {
        "copy_fraction": copy_fraction(outcome.output_token_ids, prompt_ids, COPY_SPAN_TOKENS),
        "copy_span_tokens": COPY_SPAN_TOKENS,
        "needle_found": needle_found(text, checks["needle"]) if "needle" in checks else None,
        "edit_made": None,
        "recall_exact": None,
    }
    if "rename" in checks:
        fields["edit_made"] = bool(
            rename_applied(text, checks["rename"]["old"], checks["rename"]["new"])["renamed"]
        )
    if "reference_text" in checks:
        fields["recall_exact"] = contains_verbatim(text, checks["reference_text"])
    return fields
