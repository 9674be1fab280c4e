"""Losslessness of speculative decoding, measured: each drafted shot against the no-draft shot."""

import math
from typing import Any

from whichshot.shots.axes import AXES, BASE_WORKLOAD, NO_DRAFT
from whichshot.shots.quality import first_divergence

_AXES_BUT_MODE = tuple(axis for axis in AXES if axis != "spec_mode")


def counterpart_key(record: dict[str, Any]) -> tuple:
    """The shot's place with drafting aside: every axis but the mode, the repeat and the position.
    A drafted shot and its no-draft counterpart share it."""
    return (
        *(_plain(record.get(axis)) for axis in _AXES_BUT_MODE),
        record["repeat"],
        record["series_position"],
    )


def _plain(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def with_lossless(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of the records with lossless_vs_none and first_divergence_token set on drafted workload
    shots that have an ok no-draft counterpart (None elsewhere); the input records are not changed."""
    reference = {
        counterpart_key(r): r["output_token_ids"]
        for r in records
        if r["spec_mode"] == NO_DRAFT and r["status"] == "ok" and r["workload"] != BASE_WORKLOAD
    }
    return [{**record, **_lossless_fields(record, reference)} for record in records]


def _lossless_fields(record: dict[str, Any], reference: dict[tuple, list[int]]) -> dict[str, Any]:
    drafted = record["spec_mode"] != NO_DRAFT and record["status"] == "ok"
    ref = reference.get(counterpart_key(record)) if record["workload"] != BASE_WORKLOAD else None
    if ref is None or not drafted:
        return {"lossless_vs_none": None, "first_divergence_token": None}
    divergence = first_divergence(ref, record["output_token_ids"])
    return {"lossless_vs_none": divergence is None, "first_divergence_token": divergence}
