"""Other work on the host during a shot, measured for real with child processes, and the host_busy
caveat it fires."""

import subprocess
import sys
import time

import pandas as pd

from whichshot.caveats import Evidence, host_busy
from whichshot.figures import Figure
from whichshot.host_load import BUSY_CORES, HostLoad

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


def _evidence(cores: list[float | None]) -> Evidence:
    shots = pd.DataFrame({"shot_id": [f"s{i}" for i in range(len(cores))], "status": "ok",
                          "host_foreign_cores": cores})  # fmt: skip
    figure = Figure(figure_id="e/m/x/decode_tok_s", value=1.0, unit="tok/s", kind="derived", formula="f",
                    engine="e", model="m", prompt_tokens=None, protocol="warm", metric="decode_tok_s",
                    shot_ids=["s1"])  # fmt: skip
    return Evidence(shots=shots, figures=[figure])


def test_host_busy_fires_only_above_the_threshold_and_names_the_figures():
    assert host_busy(_evidence([0.0, BUSY_CORES, None])) is None
    caveat = host_busy(_evidence([0.0, 1.3, None]))
    assert caveat is not None and caveat.figure_ids == ["e/m/x/decode_tok_s"]
    assert "1 shot(s)" in caveat.sentence and "1.30 cores in s1" in caveat.sentence
    assert host_busy(Evidence(shots=pd.DataFrame({"status": ["ok"]}), figures=[])) is None  # older runs
