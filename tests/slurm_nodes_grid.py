"""One grid through the Slurm profile twice on a private Slurm on this machine, and where the time
went: once on one node (measurement jobs one at a time, what a one-node partition gives), once on
three simulated nodes with each placement group pinned to its own node (placement.nodes).

    python -m tests.slurm_nodes_grid WORKDIR [SUMMARY_DIR]

The grid is tests/test_e2e_slurm.py's (the smoke grid at three prompt lengths, placed by prompt
length). SUMMARY_DIR (default WORKDIR/summary) receives `slurm_nodes.json` (per variant: wall time,
how it splits, the checks), `<variant>_slurm_jobs.csv` (every job Slurm remembers) and the
three-node run's shots, figures and caveats. The simulated nodes share this machine's cores: the
comparison is of scheduling and placement, not of speed.
"""

import json
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pandas as pd

from tests.pipeline import run_pipeline
from tests.slurm_cluster import (
    local_profile,
    measurement_jobs,
    most_at_once,
    shot_windows,
    start_cluster,
)
from tests.test_e2e_slurm import NODES, nodes_config, overlapping_on_one_node, targets

VARIANTS = {"one_node": 1, "three_nodes": NODES}


def covered_seconds(jobs: list[dict[str, str]]) -> float:
    """Seconds in which at least one of these Slurm jobs ran (whole seconds, as Slurm keeps them)."""
    spans = sorted((datetime.fromisoformat(j["start"]), datetime.fromisoformat(j["end"])) for j in jobs)
    total, reach = 0.0, None
    for start, end in spans:
        if reach is None or start > reach:
            total += (end - start).total_seconds()
            reach = end
        elif end > reach:
            total += (end - reach).total_seconds()
            reach = end
    return total


def run_variant(nodes: int, workdir: Path) -> dict:
    """The grid on a fresh private Slurm of `nodes` nodes; the summary of where its time went."""
    cluster = start_cluster(nodes)
    try:
        config = nodes_config(cluster.nodes if nodes > 1 else [])
        profile = local_profile(Path(tempfile.mkdtemp(prefix="whichshot-slurm-profile-")), nodes=nodes)
        started = time.monotonic()
        result = run_pipeline(workdir, config, *targets(), profile=profile, env=cluster.env, timeout_s=3000)
        wall = time.monotonic() - started
        (workdir / "snakemake.log").write_text(result.stdout + result.stderr)
        jobs = cluster.jobs()
    finally:
        cluster.stop()
    shots = pd.read_parquet(workdir / "results" / "shots.parquet")
    measuring = measurement_jobs(jobs)
    windows = shot_windows(shots)
    starts = shots.drop_duplicates("process_id")["process_ready_s"].fillna(0)
    return {
        "snakemake_rc": result.returncode,
        "nodes": nodes,
        "wall_s": round(wall, 1),
        "slurm_jobs": len(jobs),
        "measurement_jobs": len(measuring),
        "seconds_some_slurm_job_ran": covered_seconds(jobs),
        "seconds_no_slurm_job_ran": round(wall - covered_seconds(jobs), 1),
        "measurement_job_seconds": sum(
            (datetime.fromisoformat(j["end"]) - datetime.fromisoformat(j["start"])).total_seconds()
            for j in measuring
        ),
        "series_window_seconds": round(float((windows["end"] - windows["start"]).sum()), 1),
        "engine_start_up_seconds": round(float(starts.sum()), 1),
        "most_measurement_jobs_at_once": most_at_once(measuring),
        "overlapping_jobs_on_one_node": overlapping_on_one_node(measuring),
        "shots": len(shots),
        "shots_ok": int((shots["status"] == "ok").sum()),
        "hosts": sorted(shots["hostname"].unique()),
        "jobs": jobs,
    }


def main(workdir: Path, summary_dir: Path) -> int:
    summary_dir.mkdir(parents=True, exist_ok=True)
    summary = {}
    for name, nodes in VARIANTS.items():
        print(f"{name}: the grid on {nodes} node(s) in {workdir / name}", flush=True)
        summary[name] = run_variant(nodes, workdir / name)
        pd.DataFrame(summary[name].pop("jobs")).to_csv(summary_dir / f"{name}_slurm_jobs.csv", index=False)
        print(json.dumps(summary[name], indent=2), flush=True)
    walls = {name: summary[name]["wall_s"] for name in VARIANTS}
    summary["wall_three_over_one"] = round(walls["three_nodes"] / walls["one_node"], 3)
    (summary_dir / "slurm_nodes.json").write_text(json.dumps(summary, indent=2) + "\n")
    for table in ("shots.parquet", "figures.parquet", "caveats.parquet"):
        shutil.copy(workdir / "three_nodes" / "results" / table, summary_dir / table)
    ok = all(summary[name]["snakemake_rc"] == 0 for name in VARIANTS)
    return 0 if ok and not summary["three_nodes"]["overlapping_jobs_on_one_node"] else 1


if __name__ == "__main__":
    work = Path(sys.argv[1]).resolve()
    sys.exit(main(work, Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else work / "summary"))
