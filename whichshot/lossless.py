"""Losslessness of speculative decoding, measured: each drafted shot against the no-draft shot."""

from typing import Any

from whichshot.quality import first_divergence

NO_DRAFT = "none"


def _counterpart_key(record: dict[str, Any]) -> tuple:
    # Same cell and position, drafting aside: the series label with its mode segment set to none.
    parts = record["series_label"].split(".")
    parts[-1] = NO_DRAFT
    return (".".join(parts), record["series_position"])


def annotate_lossless(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set lossless_vs_none and first_divergence_token on drafted workload shots (None elsewhere)."""
    reference = {
        _counterpart_key(r): r["output_token_ids"]
        for r in records
        if r.get("spec_mode") == NO_DRAFT and r["status"] == "ok" and r.get("workload") != "continue_text"
    }
    for record in records:
        ref = reference.get(_counterpart_key(record)) if record.get("workload") != "continue_text" else None
        drafted = record.get("spec_mode") != NO_DRAFT and record["status"] == "ok"
        if ref is None or not drafted:
            record["lossless_vs_none"] = record["first_divergence_token"] = None
            continue
        divergence = first_divergence(ref, record["output_token_ids"])
        record["lossless_vs_none"] = divergence is None
        record["first_divergence_token"] = divergence
    return records
