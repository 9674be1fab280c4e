"""Committed H200 reference runs re-summarised with this checkout's per-shot energy split: the
shots' own rows, with the columns telemetry.summary.PHASE_COLUMNS filled from the run's
telemetry.parquet (every raw sample, as the recorder kept it). Runs recorded before the split
have those columns null in shots.parquet; their samples are all the split needs."""

import math
from pathlib import Path

import pandas as pd

from whichshot.shots.upgrade import read_shots
from whichshot.telemetry.summary import PHASE_COLUMNS, summarize_shot

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference"


def _samples(telemetry: pd.DataFrame) -> list[dict]:
    """Sample dicts as the recorder hands them out: a sensor not read is None, not NaN."""
    rows = telemetry.sort_values("t_mono_s").to_dict("records")
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in rows]


def resummarized_shots(run_dir: Path) -> pd.DataFrame:
    """shots.parquet of run_dir with PHASE_COLUMNS (and gpu_energy_j, for a check) from its samples."""
    shots = read_shots(run_dir / "shots.parquet")
    telemetry = pd.read_parquet(run_dir / "telemetry.parquet")
    by_job = {job: _samples(rows) for job, rows in telemetry.groupby("job_id", sort=False)}
    shots["recomputed_gpu_energy_j"] = None
    for index, shot in shots.iterrows():
        if shot["status"] != "ok" or shot["job_id"] not in by_job:
            continue
        first = shot["first_token_mono_s"]
        summary = summarize_shot(
            by_job[shot["job_id"]],
            shot["t_request_mono_s"],
            shot["t_end_mono_s"],
            shot["output_tokens"],
            None if pd.isna(first) else first,
        )
        for column in PHASE_COLUMNS:
            shots.at[index, column] = summary[column]
        shots.at[index, "recomputed_gpu_energy_j"] = summary["gpu_energy_j"]
    return shots
