"""Where a run's measuring time went, from its shots.parquet: per workload (the protocol grid is
continue_text), the shots, their output tokens, the seconds inside requests (sum of e2e_s) and the
span from the first request to the last answer. Process start-ups, rests and llama-bench fall in
the span, not in the requests.

Usage: python tools/shot_time.py RUN_DIR   (RUN_DIR holds shots.parquet)
"""

import sys
from pathlib import Path

import pandas as pd


def shot_time(shots: pd.DataFrame) -> pd.DataFrame:
    """One row per workload, one for the workloads together (all but the grid) and one for the run."""
    rows = [_row(name, group) for name, group in shots.groupby("workload", sort=False)]
    workloads = shots[shots["workload"] != "continue_text"]
    together = [_row("workloads", workloads)] if len(workloads) else []
    return pd.DataFrame([*rows, *together, _row("all", shots)]).set_index("workload")


def _row(name: str, shots: pd.DataFrame) -> dict:
    return {
        "workload": name,
        "shots": len(shots),
        "output_tokens": int(shots["output_tokens"].fillna(0).sum()),
        "in_requests_s": round(float(shots["e2e_s"].fillna(0).sum()), 1),
        "span_s": round(float(shots["t_end_mono_s"].max() - shots["t_request_mono_s"].min()), 1),
    }


if __name__ == "__main__":
    print(shot_time(pd.read_parquet(Path(sys.argv[1]) / "shots.parquet")).to_string())
