"""A sensor disappears mid-run (real engine, real Linux backend over a sysfs tree we control):
the shots go on, each later shot records the gap, and the gap becomes a caveat."""

import threading
import time

import pandas as pd
import pytest

from tests.fault_kit import child_processes, job_context, warm_job
from whichshot import telemetry
from whichshot.figures.table import compute_figures
from whichshot.measure.aggregate import aggregate
from whichshot.measure.series import run_series_with_telemetry
from whichshot.tables import read_jsonl
from whichshot.telemetry.linux import open_linux

pytestmark = pytest.mark.e2e


def _fake_sysfs(root):
    """A running CPU-frequency source (cpufreq) and one thermal zone, laid out like /sys."""
    freq = root / "sys" / "devices" / "system" / "cpu" / "cpu0" / "cpufreq"
    freq.mkdir(parents=True)
    (freq / "scaling_cur_freq").write_text("2100000\n")
    zone = root / "sys" / "class" / "thermal" / "thermal_zone0"
    zone.mkdir(parents=True)
    (zone / "temp").write_text("45000\n")
    return zone / "temp"


def _after_first_shot(partial, action):
    """Run action once the series' first shot is written (the job rests before shot 2)."""

    def watch():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if partial.exists() and partial.read_text().strip():
                action()
                return
            time.sleep(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_sensor_vanishing_mid_run_is_a_recorded_gap_and_a_caveat(tmp_path, monkeypatch):
    temp = _fake_sysfs(tmp_path / "root")
    monkeypatch.setitem(telemetry._OPENERS, "linux", lambda: open_linux(tmp_path / "root"))
    ctx = job_context(tmp_path, warm_job(shots=3, rest_s=0.5))
    shots_path = tmp_path / "shots" / f"{ctx.job.job_id}.jsonl"
    samples_path = tmp_path / "telemetry" / f"{ctx.job.job_id}.jsonl"
    partial = shots_path.with_name(shots_path.name + ".partial")
    watcher = _after_first_shot(partial, lambda: temp.write_text(""))  # the sensor reads as nothing
    run_series_with_telemetry(ctx, shots_path, samples_path, {"backends": ["linux"], "interval_s": 0.05})
    watcher.join(1)
    assert child_processes() == []

    shots = read_jsonl([partial])  # the journals: measure_series gives them their final names
    assert [s["status"] for s in shots] == ["ok", "ok", "ok"]  # the shots went on
    assert shots[0]["cpu_temp_max_c"] == 45.0 and shots[0]["telemetry_gaps"] is None
    for shot in shots[1:]:
        assert shot["cpu_temp_max_c"] is None  # not measured, never carried over
        assert shot["telemetry_gaps"].startswith("linux.cpu_temp_c: ValueError: invalid literal")
        assert shot["cpu_freq_median_mhz"] == 2100.0  # the other sensor still reads
    samples = read_jsonl([samples_path.with_name(samples_path.name + ".partial")])
    later = [s for s in samples if s["t_mono_s"] >= shots[1]["t_request_mono_s"]]
    assert later and all(s["cpu_temp_c"] is None for s in later)  # the raw samples show the gap too

    aggregate("shots", [partial], tmp_path / "shots.parquet", "faults")
    table = pd.read_parquet(tmp_path / "shots.parquet")
    figures, caveats = compute_figures(table, [], 0.7)
    gap = next(c for c in caveats if c["caveat_id"] == "telemetry_gap")
    assert gap["sentence"].startswith("A sensor stopped answering mid-run: 2 shot(s)")
    assert "linux.cpu_temp_c" in gap["sentence"]
    # it reaches the cell's telemetry figures (the CPU clock), not its speeds
    touched = {f.metric for f in figures if f.figure_id in gap["figure_ids"]}
    assert "cpu_freq_median_mhz" in touched and "decode_tok_s" not in touched
