"""Snakemake interrupted mid-grid by SIGINT and then SIGTERM (an impatient Ctrl-C, then kill):
no process of the run survives, the interrupted series is not taken as complete, and the rerun
resumes it without re-running its finished shots."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pandas as pd
import psutil
import pytest
import yaml

from tests.pipeline import REPO, load_config, run_pipeline, sigint_as_in_a_terminal

pytestmark = pytest.mark.e2e
TAG = "WHICHSHOT_FAULT_TAG"


def _grid():
    """Two warm series of three shots (rest 1 s and 0 s): small, and interruptible mid-grid."""
    config = load_config("smoke")
    config["prompts"]["lengths"] = [64]
    config["protocol"].update(cold_processes=0, warm_shots=3, rests_s=[1.0, 0])
    config["bench"] = {"enabled": False}
    return config


def tagged_processes(tag: str) -> list[psutil.Process]:
    """Every process on this machine whose environment carries our run's tag (engines included)."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get(TAG) == tag and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def _wait_for_a_shot(shots_dir, snakemake, timeout_s=900):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and snakemake.poll() is None:
        for partial in shots_dir.glob("*.jsonl.partial"):
            if partial.read_text().strip():
                return partial
        time.sleep(0.1)
    raise AssertionError(f"no shot was written (snakemake exit {snakemake.poll()})")


def test_sigint_then_sigterm_mid_grid_leaves_no_process_and_the_rerun_resumes(tmp_path):
    config, tag = _grid(), uuid.uuid4().hex
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    argv = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
            "--directory", str(tmp_path), "--cores", "1"]  # fmt: skip
    snakemake = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 env={**os.environ, TAG: tag}, start_new_session=True,
                                 preexec_fn=sigint_as_in_a_terminal)  # fmt: skip
    partial = _wait_for_a_shot(tmp_path / "results" / "shots", snakemake)
    os.killpg(snakemake.pid, signal.SIGINT)
    time.sleep(0.5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(snakemake.pid, signal.SIGTERM)
    snakemake.wait(120)

    deadline = time.monotonic() + 20  # an engine gets its stop grace; then nothing may remain
    while tagged_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert tagged_processes(tag) == []
    job = partial.name.removesuffix(".jsonl.partial")
    assert not (tmp_path / "results" / "shots" / f"{job}.jsonl").exists()
    assert not (tmp_path / "results" / "shots.parquet").exists()
    kept = [json.loads(line) for line in partial.read_text().splitlines() if line.strip()]
    assert 1 <= len(kept) < 3

    result = run_pipeline(tmp_path, config, "results/shots.parquet")
    assert result.returncode == 0, result.stderr[-3000:]
    shots = pd.read_parquet(tmp_path / "results" / "shots.parquet")
    assert len(shots) == 6 and set(shots["status"]) == {"ok"}
    series = shots[shots["job_id"] == job].sort_values("series_position")
    assert list(series["series_position"]) == [1, 2, 3]
    for old in kept:  # finished shots kept as they were, not re-run
        row = series[series["series_position"] == old["series_position"]].iloc[0]
        assert row["wall_start_utc"] == old["wall_start_utc"]
    resumed = series[series["series_position"] > len(kept)]
    assert set(resumed["process_start_reason"]) == {"resumed"}
