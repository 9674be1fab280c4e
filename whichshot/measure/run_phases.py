"""Where a run's minutes went, by phase: the workflow's jobs (each rule's benchmark file, written by
Snakemake's `benchmark:` directive) and, inside the measurement series, process start-up, prefill,
decode, rests, llama-bench and the rest of the series (stopping processes, requests' overhead).

A measurement series has no benchmark file on purpose (Snakemake's benchmark polls the process
tree, which would run beside the measurement): its seconds come from its telemetry window (the
recorder runs from before the first process starts to after the last shot) and from the
llama-bench brackets around it, as the series wrote them.

Command: python tools/run_phases.py RUN_DIR   (RUN_DIR is a results/ folder: shots.parquet,
telemetry.parquet, bench/, benchmarks/)
"""

import json
from pathlib import Path

import pandas as pd


def job_seconds(run_dir: Path) -> dict[str, float]:
    """Wall seconds per rule, summed over its jobs' benchmark files (absent rules are left out)."""
    seconds: dict[str, float] = {}
    for tsv in sorted((run_dir / "benchmarks").rglob("*.tsv")):
        rule = tsv.relative_to(run_dir / "benchmarks").parts[0].removesuffix(".tsv")
        seconds[rule] = seconds.get(rule, 0.0) + float(pd.read_csv(tsv, sep="\t")["s"].sum())
    return seconds


def series_seconds(shots: pd.DataFrame, telemetry: pd.DataFrame, bench_dir: Path) -> dict[str, float]:
    """The measurement series' seconds split into what they did."""
    window = telemetry.groupby("job_id")["t_mono_s"].agg(lambda t: t.max() - t.min()).sum()
    first_shot_of_process = shots.drop_duplicates("process_id")
    ttft = shots["ttft_s"].fillna(0)
    parts = {
        "process start-up": float(first_shot_of_process["process_ready_s"].fillna(0).sum()),
        "prefill (to first token)": float(ttft.sum()),
        "decode (first token to answer)": float((shots["e2e_s"].fillna(0) - ttft).clip(lower=0).sum()),
        "rests and preconditioning": float(shots["rest_s"].fillna(0).sum() + _precondition_s(shots)),
    }
    parts["series, other (stops, gaps, telemetry)"] = max(0.0, float(window) - sum(parts.values()))
    parts["llama-bench brackets"] = _bench_seconds(bench_dir, "brackets")
    parts["verification-cost probes"] = _bench_seconds(bench_dir, "verify_cost")
    parts["server verify probes"] = _bench_seconds(bench_dir, "verify_probe")
    return parts


def _precondition_s(shots: pd.DataFrame) -> float:
    """A series preconditions once, before its measured shots."""
    if "precondition_s" not in shots:
        return 0.0
    return float(shots.groupby("job_id")["precondition_s"].first().fillna(0).sum())


def _bench_seconds(bench_dir: Path, key: str) -> float:
    """Seconds of the tool's runs a series' bench record keeps under `key` (a list or one run)."""
    total = 0.0
    for record in bench_dir.glob("*.json"):
        runs = json.loads(record.read_text()).get(key) or []
        for run in runs if isinstance(runs, list) else [runs]:
            if "t_end_mono_s" in run:  # a probe that did not run has no times
                total += run["t_end_mono_s"] - run["t_start_mono_s"]
    return total


def run_phases(run_dir: Path) -> pd.DataFrame:
    """One row per phase: seconds, share of all phases, and where the number comes from."""
    shots = pd.read_parquet(run_dir / "shots.parquet")
    telemetry = pd.read_parquet(run_dir / "telemetry.parquet", columns=["job_id", "t_mono_s"])
    rows = [(f"job: {rule}", s, "benchmark file") for rule, s in job_seconds(run_dir).items()]
    rows += [
        (f"series: {part}", s, "shots, telemetry, bench records")
        for part, s in series_seconds(shots, telemetry, run_dir / "bench").items()
    ]
    table = pd.DataFrame(rows, columns=["phase", "seconds", "source"])
    table["share_pct"] = 100 * table["seconds"] / table["seconds"].sum()
    return table.round({"seconds": 1, "share_pct": 1}).set_index("phase")
