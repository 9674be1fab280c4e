"""Other work on the host during a shot, measured for real with child processes, and the host_busy
caveat it fires."""

import subprocess
import sys
import time

import psutil

from tests.shot_tables import cell, series, table
from whichshot.figures.constants import (
    BUSY_CORES,
    BUSY_HARNESS_CORES,
    BUSY_MARGIN_CORES,
    busy_threshold_cores,
    constant_figures,
)
from whichshot.figures.table import compute_figures
from whichshot.measure.host_load import HostLoad

SPIN = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end: pass"


def _measure(engine_pid: int, spinner_seconds: float) -> dict:
    load = HostLoad(engine_pid)
    load.start()
    spinner = subprocess.Popen([sys.executable, "-c", SPIN, str(spinner_seconds)])
    spinner.wait()
    return load.stop()


def test_work_outside_the_engine_counts_and_the_engines_own_does_not():
    idle_engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        foreign = _measure(idle_engine.pid, 1.5)
    finally:
        idle_engine.kill()
        idle_engine.wait()
    assert foreign["host_foreign_cpu_s"] >= 0.8 and foreign["host_foreign_cores"] >= 0.5, foreign

    # The same spin, now as the engine itself: its CPU time is subtracted, not counted as other work.
    engine = subprocess.Popen([sys.executable, "-c", SPIN, "1.5"])
    load = HostLoad(engine.pid)
    load.start()
    time.sleep(1.4)
    own = load.stop()
    engine.wait()
    assert own["host_foreign_cores"] < foreign["host_foreign_cores"] - 0.4, (own, foreign)


def test_an_engine_that_is_gone_gives_not_measured():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    load = HostLoad(gone.pid)
    load.start()
    assert load.stop() == {"host_foreign_cpu_s": None, "host_foreign_cores": None}


def test_host_busy_fires_only_above_the_threshold_and_reaches_the_figures_of_those_shots():
    rows = series(cell(), [{"host_foreign_cores": c} for c in (0.0, 0.1, BUSY_CORES, 1.3)])
    figures, caveats = compute_figures(table(rows), [], 0.7)
    busy = next(c for c in caveats if c["caveat_id"] == "host_busy")
    assert busy["shot_ids"] == [rows[3]["shot_id"]]
    assert "1 shot(s)" in busy["sentence"] and f"1.30 cores in {rows[3]['shot_id']}" in busy["sentence"]
    by_metric = {f.metric: f for f in figures if f.shot_index is None and f.axes.get("protocol") == "warm"}
    assert by_metric["decode_tok_s"].figure_id in busy["figure_ids"]  # the warm rule used shot 4
    quiet = series(cell(), [{"host_foreign_cores": c} for c in (0.0, BUSY_CORES)])
    _figures, caveats = compute_figures(table(quiet), [], 0.7)
    assert "host_busy" not in {c["caveat_id"] for c in caveats}


def _load_with_spinner_in(tree: bool) -> float:
    """Other work measured for an engine while a 1.5 s spinner runs as its child or beside it."""
    child = f"subprocess.Popen([sys.executable, '-c', {SPIN!r}, '1.5'])"
    spawn = f"import subprocess, sys, time; {child}; time.sleep(30)"
    engine = subprocess.Popen([sys.executable, "-c", spawn if tree else "import time; time.sleep(30)"])
    beside = None if tree else subprocess.Popen([sys.executable, "-c", SPIN, "1.5"])
    try:
        time.sleep(0.2)
        load = HostLoad(engine.pid)
        load.start()
        time.sleep(1.0)
        return load.stop()["host_foreign_cores"]
    finally:
        for child in psutil.Process(engine.pid).children(recursive=True):
            child.kill()
        engine.kill()
        engine.wait()
        if beside is not None:
            beside.kill()
            beside.wait()


def test_the_engines_child_processes_are_the_engines_work_not_other_work():
    # an engine whose work runs in a child process (as vLLM's workers do) against the same spin
    # outside the engine: only the second is other work
    assert _load_with_spinner_in(tree=True) < _load_with_spinner_in(tree=False) - 0.4


def _busy(cores: float, threads: int | None, foreign: tuple[float, ...]) -> dict | None:
    """The host_busy caveat of one warm series whose shots ran on `cores` cores (None: not recorded)."""
    rows = series(cell(), [{"host_foreign_cores": c} for c in foreign], cpu_count=cores, threads=threads)
    _figures, caveats = compute_figures(table(rows), [], 0.7)
    return next((c for c in caveats if c["caveat_id"] == "host_busy"), None)


def test_the_busy_threshold_scales_with_the_cores_the_engine_leaves_idle():
    assert busy_threshold_cores(2, 2) == BUSY_MARGIN_CORES < BUSY_CORES
    assert busy_threshold_cores(2, 4) == BUSY_MARGIN_CORES  # oversubscribed: nothing idle
    assert busy_threshold_cores(64, 2) == 64 - 2 - BUSY_HARNESS_CORES + BUSY_MARGIN_CORES
    assert busy_threshold_cores(None, 2) == busy_threshold_cores(64, None) == BUSY_CORES


def test_a_small_foreign_load_is_busy_on_a_full_machine_and_a_large_one_is_not_on_a_big_one():
    # 0.2 cores beside a 2-thread engine on 2 cores compete (the old fixed 0.25 missed them) ...
    small = _busy(2, 2, (0.0, 0.05, 0.2))
    assert small is not None and small["shot_ids"][0].endswith("/shot3"), small
    assert "0.10 cores on 2 cores with 2 engine threads" in small["sentence"]
    assert "older rows" not in small["sentence"]
    # ... while 1.3 cores on 64 leave the engine's 2 threads their cores (the old rule flagged them)
    assert _busy(64, 2, (0.0, 0.2, 1.3)) is None
    assert _busy(64, 2, (0.0, 0.2, 62.5)) is not None


def test_rows_without_a_core_count_keep_the_fixed_threshold_and_the_caveat_says_so():
    assert _busy(None, None, (0.0, 0.2)) is None
    older = _busy(None, None, (0.0, 0.3))
    assert older is not None and "1 of them record no core count" in older["sentence"], older
    assert f"fixed host_busy_cores ({BUSY_CORES:g})" in older["sentence"]


def test_the_rules_constants_are_assumed_figures():
    values = {f.metric: f.value for f in constant_figures(0.7, 0.02)}
    assert values["host_busy_margin_cores"] == BUSY_MARGIN_CORES
    assert values["host_busy_harness_cores"] == BUSY_HARNESS_CORES
    assert values["host_busy_cores"] == BUSY_CORES
