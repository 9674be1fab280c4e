"""Losslessness of speculative decoding, measured: each drafted shot against the no-draft shot, its
divergence classified from the target's own probabilities (shots.divergence), whether the no-draft
output repeats across its cell, and the speed-up over the shared prefix (shots.shared_prefix)."""

import math
from collections import defaultdict
from typing import Any

from whichshot.shots.axes import AXES, BASE_WORKLOAD, NO_DRAFT
from whichshot.shots.divergence import divergence_fields, near_tie_threshold
from whichshot.shots.quality import first_divergence
from whichshot.shots.shared_prefix import shared_prefix_speedup

_AXES_BUT_MODE = tuple(axis for axis in AXES if axis != "spec_mode")


def counterpart_key(record: dict[str, Any]) -> tuple:
    """The shot's place with drafting aside: every axis but the mode, the repeat and the position.
    A drafted shot and its no-draft counterpart share it."""
    return (
        *(_plain(record.get(axis)) for axis in _AXES_BUT_MODE),
        record["repeat"],
        record["series_position"],
    )


def _cell_prompt_key(record: dict[str, Any]) -> tuple:
    """The no-draft cell's place and the prompt: every shot of it should write the same output."""
    return (*(_plain(record.get(axis)) for axis in _AXES_BUT_MODE), record.get("prompt_sha256"))


def _plain(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def with_lossless(records: list[dict[str, Any]], probes: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """Copies of the records with lossless_vs_none, first_divergence_token, the divergence columns,
    undrafted_repeats and shared_prefix_speedup set on drafted workload shots that have an ok
    no-draft counterpart (None elsewhere; undrafted_repeats on the no-draft shots too); probes: the
    run's divergence probe records (measure.divergence_probe). The input records are not changed."""
    reference = {
        counterpart_key(r): r
        for r in records
        if r["spec_mode"] == NO_DRAFT and r["status"] == "ok" and r["workload"] != BASE_WORKLOAD
    }
    entries = {entry["shot_id"]: entry for probe in probes for entry in probe.get("shots", [])}
    notes = {probe.get("job_id"): probe.get("error") or probe.get("not_run") for probe in probes}
    threshold = near_tie_threshold(list(entries.values()))
    repeats = undrafted_repeats(list(reference.values()))
    return [{**r, **_lossless_fields(r, reference, entries, threshold, repeats, notes)} for r in records]


def undrafted_repeats(undrafted: list[dict[str, Any]]) -> dict[tuple, bool]:
    """Per no-draft cell and prompt with two or more ok shots: whether every one wrote the same tokens
    (the lossless check takes one of them for what the target writes)."""
    outputs = defaultdict(list)
    for record in undrafted:
        outputs[_cell_prompt_key(record)].append(tuple(record["output_token_ids"]))
    return {key: len(set(ids)) == 1 for key, ids in outputs.items() if len(ids) >= 2}


def _lossless_fields(
    record: dict[str, Any],
    reference: dict[tuple, dict[str, Any]],
    entries: dict[str, dict[str, Any]],
    threshold: float | None,
    repeats: dict[tuple, bool],
    notes: dict[str, str | None],
) -> dict[str, Any]:
    workload = record["workload"] != BASE_WORKLOAD
    fields = {
        "undrafted_repeats": repeats.get(_cell_prompt_key(record)) if workload else None,
        "lossless_vs_none": None,
        "first_divergence_token": None,
        "shared_prefix_speedup": None,
    }
    drafted = record["spec_mode"] != NO_DRAFT and record["status"] == "ok"
    base = reference.get(counterpart_key(record)) if workload else None
    if base is None or not drafted:
        return {**fields, **divergence_fields(None, None, None)}
    divergence = first_divergence(base["output_token_ids"], record["output_token_ids"])
    return {
        **fields,
        "lossless_vs_none": divergence is None,
        "first_divergence_token": divergence,
        "shared_prefix_speedup": shared_prefix_speedup(record, base, divergence),
        **divergence_fields(
            divergence is None, entries.get(record["shot_id"]), threshold, notes.get(record.get("job_id"))
        ),  # fmt: skip
    }
