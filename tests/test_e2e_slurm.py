"""Cluster submission for real: the smoke grid through `snakemake --executor slurm` on a private
single-node Slurm (tests/slurm_cluster.py), using workflow/profiles/slurm adapted to that cluster."""

import os
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.pipeline import load_config, run_pipeline
from tests.slurm_cluster import (
    FAKE_GPUS,
    SlurmCluster,
    local_profile,
    measurement_jobs,
    overlapping_jobs,
    overlapping_windows,
    shot_windows,
    start_cluster,
    unavailable_reason,
)
from whichshot.tables import arrow_schema, record_schema

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")  # the daemons must be gone before other modules count processes
def slurm():
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    cluster = start_cluster()
    print(f"slurm bring-up: {cluster.bring_up_s:.2f} s")
    yield cluster
    cluster.stop()


def _job_logs(workdir: Path) -> str:
    """The tail of each Slurm job log the executor kept (it keeps those of failed jobs)."""
    logs = sorted((workdir / ".snakemake" / "slurm_logs").rglob("*.log"))
    return "".join(f"\n--- {log.name}\n" + log.read_text(errors="replace")[-1500:] for log in logs)


def slurm_config() -> dict:
    """The smoke grid at its first prompt length: a cold and a warm series plus llama-bench, three
    measurement jobs. Every Slurm job costs ~30 s of submission and status polling (the executor
    backs off by 10 s per check), so the test runs as few as the checks need."""
    config = load_config("smoke")
    config["prompts"]["lengths"] = config["prompts"]["lengths"][:1]
    return config


def targets(config: dict) -> list[str]:
    """The measurement jobs and the shot table; figures and report add nothing Slurm-specific."""
    return ["results/shots.parquet"]


@pytest.fixture(scope="module")
def slurm_run(slurm: SlurmCluster, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("slurm_smoke")
    profile = local_profile(tmp_path_factory.mktemp("slurm_profile"))
    t0 = time.monotonic()
    config = slurm_config()
    result = run_pipeline(workdir, config, *targets(config), profile=profile, env=slurm.env, timeout_s=900)
    print(f"slurm smoke run: {time.monotonic() - t0:.1f} s")
    assert result.returncode == 0, result.stderr[-3000:] + _job_logs(workdir) + slurm.logs()
    return {"workdir": workdir, "jobs": slurm.jobs(), "node": slurm.node}


@pytest.fixture(scope="module")
def slurm_shots(slurm_run) -> pd.DataFrame:
    return pd.read_parquet(slurm_run["workdir"] / "results" / "shots.parquet")


def test_every_shot_ran_in_a_slurm_job_on_the_node(slurm_run, slurm_shots):
    assert len(slurm_shots) > 0 and (slurm_shots["status"] == "ok").all()
    assert slurm_shots["slurm_job_id"].notna().all(), slurm_shots["slurm_job_id"]
    assert (slurm_shots["slurm_node"] == slurm_run["node"]).all()
    series_jobs = {j["job_id"] for j in slurm_run["jobs"] if j["comment"].startswith("rule_run_series_")}
    assert set(slurm_shots["slurm_job_id"]) == series_jobs
    # One Slurm job per series: each grid cell was its own submission.
    assert slurm_shots.groupby("job_id")["slurm_job_id"].nunique().eq(1).all()
    assert slurm_shots["slurm_job_id"].nunique() == slurm_shots["job_id"].nunique()


def test_every_shot_records_the_gpu_slurm_gave_its_job(slurm_shots):
    # The profile asks for gpu: 1; the local node's two GPUs are gres entries on /dev/null, /dev/zero.
    assert slurm_shots["slurm_gpus"].isin([str(i) for i in range(len(FAKE_GPUS))]).all()


def test_measurement_series_never_overlap_in_shot_times(slurm_shots):
    assert slurm_shots["hostname"].nunique() == 1  # one host: its monotonic clock is shared
    windows = shot_windows(slurm_shots)
    assert len(windows) >= 2
    assert overlapping_windows(windows) == [], windows


def test_measurement_jobs_never_overlap_in_slurm_records(slurm_run):
    jobs = measurement_jobs(slurm_run["jobs"])
    assert {j["state"] for j in jobs} == {"COMPLETED"}
    assert overlapping_jobs(jobs) == [], jobs


def test_schema_equals_the_local_run_and_the_declared_schema(slurm_run, smoke_run):
    slurm_schema = pq.read_schema(slurm_run["workdir"] / "results" / "shots.parquet")
    local_schema = pq.read_schema(smoke_run["workdir"] / "results" / "shots.parquet")
    declared = arrow_schema(record_schema("shots"))
    assert slurm_schema.equals(local_schema, check_metadata=False)
    assert slurm_schema.equals(declared, check_metadata=False)


def test_local_shots_carry_no_slurm_fields(smoke_run):
    shots = pd.read_parquet(smoke_run["workdir"] / "results" / "shots.parquet")
    outer_job = os.environ.get("SLURM_JOB_ID")  # set only where pytest itself runs inside a Slurm job
    if outer_job is None:
        assert shots[["slurm_job_id", "slurm_node", "slurm_gpus", "gpu_uuid"]].isna().all().all()
    else:
        assert (shots["slurm_job_id"] == outer_job).all()
