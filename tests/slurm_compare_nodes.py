"""A node comparison through the Slurm profile on a private Slurm of three simulated nodes: one prompt
length's cold and warm series on each of two nodes (placement.compare_nodes), to the report.

    python -m tests.slurm_compare_nodes WORKDIR [SUMMARY_DIR]

The grid is tests/test_e2e_slurm.py's comparison (compare_config) with a cold series per node
beside the warm one, so that cold against warm shows staying on one node. SUMMARY_DIR (default
WORKDIR/summary) receives `compare.json` (wall time, placement and overlap checks, the node ratios,
the caveats that fired), `slurm_jobs.csv` (every job Slurm remembers), the run's config, shots,
figures and caveats, the nodes' probes and the model's per-token costs (hardware/, traffic/), and
the report's summary.md. The simulated nodes share this machine's cores
and GPU-less build: their ratios show the comparison's machinery, not two machines' speeds.
"""

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

from tests.pipeline import run_pipeline
from tests.slurm_cluster import (
    jobs_on,
    local_profile,
    measurement_jobs,
    most_at_once,
    overlapping_jobs,
    start_cluster,
)
from tests.test_e2e_slurm import NODES, compare_config, targets

RATIOS = ("xnode_decode_ratio", "xnode_prefill_ratio", "xnode_same_output_share")


def summarize(results: Path, jobs: list[dict[str, str]], wall_s: float, rc: int) -> dict:
    shots = pd.read_parquet(results / "shots.parquet")
    figures = pd.read_parquet(results / "figures.parquet")
    caveats = pd.read_parquet(results / "caveats.parquet")
    measuring = measurement_jobs(jobs)
    ratios = figures[figures["metric"].isin(RATIOS)]
    return {
        "snakemake_rc": rc,
        "wall_s": round(wall_s, 1),
        "measurement_jobs": len(measuring),
        "most_measurement_jobs_at_once": most_at_once(measuring),
        "overlapping_jobs_on_one_node": [
            pair
            for node in {j["nodes"] for j in measuring}
            for pair in overlapping_jobs(jobs_on(measuring, node))
        ],
        "shots": len(shots),
        "shots_ok": int((shots["status"] == "ok").sum()),
        "series_per_node": shots.groupby("node_requested")["job_id"].nunique().to_dict(),
        "shots_off_their_node": int((shots["slurm_node"] != shots["node_requested"]).sum()),
        "node_ratios": {r.figure_id: r.value for r in ratios.itertuples()},
        "caveats": {c.caveat_id: len(c.figure_ids) for c in caveats.itertuples()},
    }


def main(workdir: Path, summary_dir: Path) -> int:
    summary_dir.mkdir(parents=True, exist_ok=True)
    cluster = start_cluster(NODES)
    try:
        config = compare_config(cluster.nodes)
        config["protocol"]["cold_processes"] = 1
        profile = local_profile(Path(tempfile.mkdtemp(prefix="whichshot-slurm-profile-")), nodes=NODES)
        started = time.monotonic()
        result = run_pipeline(workdir, config, *targets(), "results/report/index.html", profile=profile,
                              env=cluster.env, timeout_s=3000)  # fmt: skip
        wall = time.monotonic() - started
        (workdir / "snakemake.log").write_text(result.stdout + result.stderr)
        jobs = cluster.jobs()
    finally:
        cluster.stop()
    results = workdir / "results"
    summary = summarize(results, jobs, wall, result.returncode)
    print(json.dumps(summary, indent=2), flush=True)
    (summary_dir / "compare.json").write_text(json.dumps(summary, indent=2) + "\n")
    (summary_dir / "config.yaml").write_text(yaml.safe_dump(config))
    pd.DataFrame(jobs).to_csv(summary_dir / "slurm_jobs.csv", index=False)
    for table in ("shots.parquet", "figures.parquet", "caveats.parquet", "report/summary.md"):
        shutil.copy(results / table, summary_dir / Path(table).name)
    for folder in ("hardware", "traffic"):  # what re-derives the ceilings (tools/rederive_reference.py)
        shutil.copytree(results / folder, summary_dir / folder, dirs_exist_ok=True)
    return 0 if result.returncode == 0 and not summary["overlapping_jobs_on_one_node"] else 1


if __name__ == "__main__":
    work = Path(sys.argv[1]).resolve()
    sys.exit(main(work, Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else work / "summary"))
