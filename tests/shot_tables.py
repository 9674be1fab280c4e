"""Hand-made shot tables with every shots.parquet column (the figure stage's input), for tests."""

from collections.abc import Sequence
from typing import Any

import pandas as pd

from whichshot.tables import record_schema

COLUMNS = list(record_schema("shots")["properties"])
VERSION = record_schema("shots")["x-schema-version"]
CELL = {
    "engine": "eng",
    "model": "m",
    "workload": "continue_text",
    "text_kind": "real",
    "prompt_tokens_requested": 64,
    "protocol": "warm",
    "rest_s": 0.0,
    "precondition_s": 0.0,
    "context_tokens_requested": 512,
    "order": "same",
    "spec_mode": "none",
    "engine_warmup": "engine_default",
    "prefill_chunk_tokens": 512,
    "parallel_streams": 1,
}
# Value columns a generated shot carries unless told otherwise.
VALUES = {"ttft_s": 0.1, "prefill_tok_s": 640.0, "decode_tok_s": 50.0, "engine_prefill_tok_s": 650.0,
          "engine_decode_tok_s": 50.2, "output_tokens": 16, "output_tokens_requested": 16,
          "host_foreign_cores": 0.0}  # fmt: skip


def cell(**changes: Any) -> dict[str, Any]:
    return {**CELL, **changes}


def job_id(of: dict[str, Any], repeat: int = 1) -> str:
    # Opaque to the figure stage (it never takes a job id apart); unique per cell and repeat.
    axes = [*CELL, *(a for a in ("trace", "request_id", "node_requested") if of.get(a) is not None)]
    return "|".join(str(of[a]) for a in axes) + f"|rep{repeat}"


def series(
    of: dict[str, Any],
    shots: Sequence[dict[str, Any] | None],
    processes: Sequence[int] | None = None,
    repeat: int = 1,
    **common: Any,
) -> list[dict[str, Any]]:
    """One series of a cell: shots[i] holds the values of position i+1 (None = the shot failed);
    processes[i] is the process that served it (default: one process for a warm series, a fresh
    one per shot for a cold series). Shot indices count every shot a process served."""
    cold = of["protocol"] == "cold"
    processes = processes or [i + 1 if cold else 1 for i in range(len(shots))]
    served: dict[int, int] = {}
    rows = []
    job = job_id(of, repeat)
    for position, (values, process) in enumerate(zip(shots, processes, strict=True), start=1):
        served[process] = served.get(process, 0) + 1
        row = dict.fromkeys(COLUMNS)
        row.update(of)
        row.update(
            schema_version=VERSION, run_id="t", job_id=job, shot_id=f"{job}/shot{position}", repeat=repeat,
            series_position=position, series_length=len(shots), process_id=f"{job}/proc{process}",
            process_seq=process, shot_index=served[process], hostname="box", prompt_tokens=64,
            t_request_mono_s=10.0 * position, t_end_mono_s=10.0 * position + 1.5, output_token_ids=[],
            status="ok" if values is not None else "failed", engine_died=False,
            error=None if values is not None else "RequestException: boom",
            process_start_reason=_start_reason(cold, process),
        )  # fmt: skip
        if values is not None:
            # A real run compares every drafted workload shot with the no-draft output: one said
            # otherwise only where a test asks (an unchecked one is gated out, caveats.gates).
            compared = {"lossless_vs_none": True} if of["spec_mode"] != "none" else {}
            given = {**VALUES, **compared, **common, **values}
            prompt_tokens = given.get("prompt_tokens", row["prompt_tokens"])
            row.update({**_streams(of["parallel_streams"], prompt_tokens, given["output_tokens"]), **given})
        rows.append(row)
    return rows


def _streams(streams: int, prompt_tokens: int, output_tokens: int | None) -> dict[str, Any]:
    """The streams' columns of an ok shot whose every stream returned stream 1's tokens."""
    return {"streams_in_flight": streams, "streams_prompt_tokens": prompt_tokens * streams,
            "streams_output_tokens": None if output_tokens is None else output_tokens * streams}  # fmt: skip


def _start_reason(cold: bool, process: int) -> str:
    if cold:
        return "cold"
    return "series_start" if process == 1 else "after_engine_death"


def table(*series_rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([row for rows in series_rows for row in rows], columns=COLUMNS)
