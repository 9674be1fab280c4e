"""The default grid (config/config.yaml, every target of `rule all`) through the Slurm profile on a
private single-node Slurm, then the cluster checks of tests/test_e2e_slurm.py on its results.

Too long for the test suite (~60 Slurm jobs); run by hand:

    python -m tests.slurm_default_grid WORKDIR [SUMMARY_DIR]

WORKDIR receives the run (results/, logs/); SUMMARY_DIR (default WORKDIR/slurm_check) receives
`slurm_check.json` (the checks and their numbers), `slurm_jobs.csv` (every job Slurm remembers) and
`shot_windows.csv` (per measurement job: first engine spawn to last shot end, monotonic seconds).
"""

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from tests.pipeline import REPO
from tests.slurm_cluster import (
    SlurmCluster,
    local_profile,
    measurement_jobs,
    overlapping_jobs,
    overlapping_windows,
    shot_windows,
    start_cluster,
    window_gaps,
)


def run_default_grid(cluster: SlurmCluster, workdir: Path, log: Path) -> tuple[int, float]:
    """snakemake with the shipped default config through the local Slurm profile; (rc, seconds)."""
    (workdir / "config").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "config" / "config.yaml", workdir / "config" / "config.yaml")
    shutil.copytree(REPO / "claims", workdir / "claims", dirs_exist_ok=True)  # the config's claims files
    profile = local_profile(Path(tempfile.mkdtemp(prefix="whichshot-slurm-profile-")))
    argv = [
        sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
        "--directory", str(workdir), "--workflow-profile", str(profile),
    ]  # fmt: skip
    started = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=cluster.env, check=False)
    return done.returncode, time.monotonic() - started


def check(cluster: SlurmCluster, workdir: Path, summary_dir: Path, rc: int, seconds: float) -> dict:
    """The cluster checks on the finished run; writes the summary files and returns the summary."""
    jobs = cluster.jobs()
    shots = pd.read_parquet(workdir / "results" / "shots.parquet")
    windows = shot_windows(shots)
    measuring = measurement_jobs(jobs)
    series_jobs = {j["job_id"] for j in jobs if j["comment"].startswith("rule_run_series_")}
    summary = {
        "snakemake_rc": rc,
        "wall_s": round(seconds, 1),
        "slurm_jobs": len(jobs),
        "slurm_job_states": sorted({j["state"] for j in jobs}),
        "measurement_jobs": len(measuring),
        "shots": len(shots),
        "shots_ok": int((shots["status"] == "ok").sum()),
        "series": int(shots["job_id"].nunique()),
        "shots_without_slurm_job_id": int(shots["slurm_job_id"].isna().sum()),
        "shot_jobs_equal_series_jobs": set(shots["slurm_job_id"].dropna()) == series_jobs,
        "nodes": sorted(shots["slurm_node"].dropna().unique()),
        "gpus_given": sorted(shots["slurm_gpus"].dropna().unique()),
        "hosts": int(shots["hostname"].nunique()),
        "overlapping_shot_windows": overlapping_windows(windows),
        "smallest_gap_between_series_s": round(float(min(window_gaps(windows))), 3),
        "overlapping_slurm_jobs": overlapping_jobs(measuring),
    }
    summary_dir.mkdir(parents=True, exist_ok=True)
    (summary_dir / "slurm_check.json").write_text(json.dumps(summary, indent=2) + "\n")
    pd.DataFrame(jobs).to_csv(summary_dir / "slurm_jobs.csv", index=False)
    windows.round(3).to_csv(summary_dir / "shot_windows.csv")
    return summary


def main(workdir: Path, summary_dir: Path) -> int:
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = start_cluster()
    try:
        print(f"slurm up in {cluster.bring_up_s:.1f} s; running the default grid in {workdir}", flush=True)
        rc, seconds = run_default_grid(cluster, workdir, workdir / "snakemake.log")
        print(f"snakemake exited {rc} after {seconds:.0f} s", flush=True)
        summary = check(cluster, workdir, summary_dir, rc, seconds)
    finally:
        cluster.stop()
    print(json.dumps(summary, indent=2))
    clean = not summary["overlapping_shot_windows"] and not summary["overlapping_slurm_jobs"]
    return 0 if rc == 0 and clean and summary["shots_without_slurm_job_id"] == 0 else 1


if __name__ == "__main__":
    work = Path(sys.argv[1]).resolve()
    sys.exit(main(work, Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else work / "slurm_check"))
