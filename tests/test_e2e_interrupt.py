"""Ctrl-C mid-series against the real pipeline: no orphan engine, finished shots kept, rerun resumes."""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

from tests.pipeline import REPO, engine_processes, load_config, run_pipeline, sigint_as_in_a_terminal

pytestmark = pytest.mark.e2e


def _interrupt_config():
    config = load_config("smoke")
    config["prompts"]["lengths"] = [64]
    config["protocol"].update(cold_processes=0, warm_shots=4, rests_s=[1.5])
    config["bench"] = {"enabled": False}
    return config


def _start(workdir, config):
    (workdir / "config").mkdir(parents=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    argv = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
            "--directory", str(workdir), "--cores", "1"]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, preexec_fn=sigint_as_in_a_terminal)  # fmt: skip


def _wait_for_shots(partial, count, timeout_s=1200):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if partial.exists() and len(partial.read_text().splitlines()) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"{partial} never held {count} shots")


def test_ctrl_c_keeps_finished_shots_and_leaves_no_engine(tmp_path):
    before = {p.pid for p in engine_processes(tmp_path)}
    config = _interrupt_config()
    job = "llama_cpp.smollm2_135m.p64.warm-rest1p5s-pre0s.ctx512.same.rep1"
    shots_dir = tmp_path / "results" / "shots"
    partial = shots_dir / f"{job}.jsonl.partial"
    snakemake = _start(tmp_path, config)
    _wait_for_shots(partial, 1)
    os.killpg(snakemake.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    snakemake.wait(120)
    time.sleep(1)
    assert [p for p in engine_processes(tmp_path) if p.pid not in before] == []
    assert not (shots_dir / f"{job}.jsonl").exists()
    kept = [json.loads(line) for line in partial.read_text().splitlines()]
    assert 1 <= len(kept) < 4

    result = run_pipeline(tmp_path, config, "results/shots.parquet")  # figures and report add nothing here
    assert result.returncode == 0, result.stderr[-3000:]
    shots = pd.read_parquet(tmp_path / "results" / "shots.parquet").sort_values("series_position")
    assert list(shots["series_position"]) == [1, 2, 3, 4]
    first = shots.iloc[0]
    assert first["wall_start_utc"] == kept[0]["wall_start_utc"]  # not re-run
    resumed = shots[shots["series_position"] > len(kept)]
    assert set(resumed["process_start_reason"]) == {"resumed"}
    assert resumed["shot_index"].iloc[0] == 1  # a new process, and the row says so
