"""A shots table of any schema version read as the current one. Columns a version lacked are derived
from what it recorded where they can be, else null; the older table is upgraded in memory, never
rewritten."""

from pathlib import Path

import pandas as pd

from whichshot.shots.axes import (
    BASE_WORKLOAD,
    DEFAULT_COMPILE_CACHE,
    DEFAULT_PREFILL_CHUNK,
    DEFAULT_WARMUP,
    ONE_STREAM,
)
from whichshot.shots.checks import counter_power_w, power_agrees_with_counter
from whichshot.shots.quality import python_parses
from whichshot.shots.quality_fields import repetition_fields
from whichshot.shots.task_gates import gate_fields
from whichshot.tables import record_schema


def read_shots(path: Path) -> pd.DataFrame:
    """shots.parquet as a frame with the current schema's columns (see upgrade_shots)."""
    return upgrade_shots(pd.read_parquet(path))


VERSION_1_GPU = "NVML index 0, whatever GPU the engine used (shots of version 1)"
# The warm-up each engine kind of version 1 did by default (its engine_default), in the engines' own
# words: version 1 had no warm-up axis. These are the kinds there were then; any other kind gets null.
VERSION_1_WARMUPS = {
    "llama_cpp": "one decode before ready",
    "transformers": "none",
    "openai": "the server's own, not known",
}


def upgrade_shots(shots: pd.DataFrame) -> pd.DataFrame:
    """A shots table of any version with the current schema's columns. Columns a version lacked
    are derived from what it recorded where they can be (version 1 -> 2: prompt_tokens_requested,
    gpu_energy_power_w, gpu_power_reliable against the counter; 2 -> 3: repetition, loops and the
    gates the output alone decides; 3 -> 4: output_length from the workload, no trace; 4 -> 5: one
    stream, llama.cpp's 512-token prefill chunk), else null (not measured; 5 -> 6 added the GPUs'
    identity, which older rows did not record; 6 -> 7 the node axis, null: no node comparison; 7 -> 8
    every stream's tokens: N prompts, and N outputs where the N streams returned the same ids; 8 -> 9
    engine_attached false: whichshot started every engine before it could attach to one; 9 -> 10 the
    tokens its speeds divided by, that the engines it started ran on this machine, and compile_cache
    engine_default, the only one there was; 10 -> 11 gpu_layers, draft_model_sha256 and settings_sha256
    null: not recorded)."""
    shots = shots.copy()
    for column in record_schema("shots")["properties"]:
        if column not in shots:
            shots[column] = None
    version = shots["schema_version"].fillna(1).astype(int)
    old = version < 2
    if old.any():
        shots.loc[old] = _from_version_1(shots.loc[old])
    before_gates = version < 3
    if before_gates.any():
        shots.loc[before_gates] = _from_version_2(shots.loc[before_gates])
    before_traces = version < 4
    continued = shots["workload"] == BASE_WORKLOAD
    shots.loc[before_traces & continued, "output_length"] = "fixed"
    shots.loc[before_traces & ~continued, "output_length"] = "natural"
    before_load_axes = version < 5
    shots.loc[before_load_axes, "parallel_streams"] = ONE_STREAM
    shots.loc[before_load_axes, "prefill_chunk_tokens"] = DEFAULT_PREFILL_CHUNK
    before_totals = version < 8
    streams = shots["streams_in_flight"].where(shots["parallel_streams"] != ONE_STREAM, ONE_STREAM)
    # Every stream sent the same prompt; their outputs count alike only where they were the same ids.
    alike = before_totals & ((streams == ONE_STREAM) | (shots["streams_same_output"] == True))  # noqa: E712
    shots.loc[before_totals, "streams_prompt_tokens"] = shots["prompt_tokens"] * streams
    shots.loc[alike, "streams_output_tokens"] = shots["output_tokens"] * streams
    # Their J/token divided every stream's energy by stream 1's tokens: divide again by all of them.
    several = before_totals & (streams != ONE_STREAM)
    per_token = pd.to_numeric(shots["gpu_energy_j"]) / pd.to_numeric(shots["streams_output_tokens"])
    shots.loc[several, "energy_j_per_token"] = per_token.astype(float)
    shots.loc[version < 9, "engine_attached"] = False
    _from_version_9(shots, version < 10)
    shots.loc[version < 10, "compile_cache"] = DEFAULT_COMPILE_CACHE
    return shots


def _from_version_9(shots: pd.DataFrame, old: pd.Series) -> None:
    """What version 9 timed by: output_tokens - 1 over the decode span, prompt_tokens over TTFT; an
    engine whichshot started ran on this machine (where an attached one ran was not recorded)."""
    shots.loc[old & shots["decode_span_s"].notna(), "decode_tokens"] = shots["output_tokens"] - 1
    shots.loc[old & shots["prefill_tok_s"].notna(), "prefill_tokens"] = shots["prompt_tokens"]
    shots.loc[old & ~shots["engine_attached"].astype(bool), "engine_on_this_machine"] = True


def _from_version_2(rows: pd.DataFrame) -> pd.DataFrame:
    """Repetition and loops from the output ids; the gates that need no prompt check (new_code's
    parse, explain's loop) from the output; the others stay null: their checks were not kept."""
    rows = rows.copy()
    for index, row in rows.iterrows():
        if row["status"] != "ok":
            continue
        quality = repetition_fields([int(i) for i in row["output_token_ids"]])
        quality.update({c: _flag(row[c]) for c in ("needle_found", "edit_made", "recall_exact")})
        if row["workload"] == "new_code":
            quality["code_parses"] = python_parses(row["output_text"] or "")
        for column, value in {**quality, **gate_fields(row["workload"], quality)}.items():
            rows.at[index, column] = value
    return rows


def _from_version_1(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows.copy()
    continued = rows["workload"] == BASE_WORKLOAD
    rows["prompt_tokens_requested"] = rows["prompt_tokens"].where(continued, None)
    # Version 1 had no choice: each engine kind did what it did by default.
    rows["engine_warmup"] = DEFAULT_WARMUP
    rows["engine_warmup_run"] = [VERSION_1_WARMUPS.get(kind) for kind in rows["engine_kind"]]
    sampled_gpu = rows["telemetry_backends"].fillna("").str.contains("nvml")
    rows["telemetry_gpu_choice"] = rows["telemetry_gpu_choice"].where(~sampled_gpu, VERSION_1_GPU)
    seconds = rows["t_end_mono_s"] - rows["t_request_mono_s"]
    rows["gpu_energy_power_w"] = [
        counter_power_w(_value(energy), s) for energy, s in zip(rows["gpu_energy_j"], seconds, strict=True)
    ]
    rows["gpu_power_reliable"] = [
        power_agrees_with_counter(_value(median), _value(counter))
        for median, counter in zip(rows["gpu_power_median_w"], rows["gpu_energy_power_w"], strict=True)
    ]
    return rows


def _flag(value) -> bool | None:
    return None if value is None or pd.isna(value) else bool(value)


def _value(value):
    return None if value is None or pd.isna(value) else float(value)
