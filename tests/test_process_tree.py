"""Nothing the harness starts outlives it: an engine's children and llama-bench runs die with the
harness however it ends (SIGKILL included), and with the engine's stop even if they ignore SIGTERM."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

from whichshot.engine.process import EngineProcess

REPO = Path(__file__).resolve().parent.parent
# A process that ignores SIGTERM (as a busy worker may), writes its pid to argv[1], then sleeps.
STUBBORN = (
    "import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"
)
# An engine stand-in that starts a child of its own (STUBBORN) and sleeps.
PARENT = (
    f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {STUBBORN!r}, sys.argv[1]]); "
    "time.sleep(120)"
)


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def survivors(pids: list[int], within_s: float = 5.0) -> list[int]:
    """Those of `pids` still running after `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if running(pid)]


def pid_written(path: Path, timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.02)
    return int(path.read_text())


def start_harness(code: str) -> subprocess.Popen:
    """A harness-like Python process running `code` (stdout: a pipe for what it prints)."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, stdout=subprocess.PIPE,
                            text=True)  # fmt: skip


def test_a_killed_harness_takes_the_engines_children_with_it(tmp_path):
    child_pid_file = tmp_path / "child.pid"
    harness = start_harness(f"""
        import sys, time
        from pathlib import Path
        from whichshot.engine.process import EngineProcess
        argv = [sys.executable, "-c", {PARENT!r}, {str(child_pid_file)!r}]
        engine = EngineProcess(argv, Path({str(tmp_path / "e.log")!r}))
        print(engine.pid, flush=True)
        time.sleep(120)
    """)  # fmt: skip
    engine_pid = int(harness.stdout.readline())
    child_pid = pid_written(child_pid_file)
    harness.kill()  # SIGKILL: no finally, no signal handler of the harness runs
    harness.wait()
    assert survivors([engine_pid, child_pid]) == [], "the engine or its child outlived the harness"


def test_a_killed_harness_takes_its_llama_bench_run_with_it(tmp_path):
    bench_pid_file = tmp_path / "bench.pid"
    harness = start_harness(f"""
        import sys
        from whichshot.measure.bench import BenchPlan, run_bracket
        # A stand-in for llama-bench: the arguments run_bracket appends are left in its sys.argv.
        plan = BenchPlan(argv=(sys.executable, "-c", {PARENT!r}, {str(bench_pid_file)!r}), prompt_tokens=8,
                         output_tokens=4, repetitions=1)
        run_bracket(plan, "before")
    """)  # fmt: skip
    bench_child_pid = pid_written(bench_pid_file)
    bench_pid = psutil.Process(bench_child_pid).ppid()
    harness.kill()
    harness.wait()
    assert survivors([bench_pid, bench_child_pid]) == [], "the llama-bench run outlived the harness"


def test_stopping_an_engine_stops_the_children_that_ignore_sigterm(tmp_path):
    child_pid_file = tmp_path / "child.pid"
    engine = EngineProcess([sys.executable, "-c", PARENT, str(child_pid_file)], tmp_path / "e.log")
    child_pid = pid_written(child_pid_file)
    assert engine.stop() == -signal.SIGTERM
    assert survivors([child_pid], within_s=2.0) == [], "the engine's child outlived its stop"


def test_a_hangup_unwinds_the_harness_so_it_stops_its_engine(tmp_path):
    log = tmp_path / "e.log"
    engine_code = (
        "import signal, sys, time\n"
        "def stopped(*_):\n    print('stopped by SIGTERM', flush=True)\n    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stopped)\nprint('up', flush=True)\ntime.sleep(120)\n"
    )
    harness = start_harness(f"""
        import signal, sys, time
        from pathlib import Path
        from types import SimpleNamespace
        from whichshot.entry import run_script
        from whichshot.engine.process import EngineProcess

        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as under a terminal, whatever this test inherited

        def main(_smk):
            with EngineProcess([sys.executable, "-c", {engine_code!r}], Path({str(log)!r})):
                print("started", flush=True)
                time.sleep(120)

        run_script(SimpleNamespace(log=[], config={{}}), main)
    """)  # fmt: skip
    assert harness.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 30
    while "up" not in log.read_text():
        assert time.monotonic() < deadline, "the engine never started"
        time.sleep(0.02)
    os.kill(harness.pid, signal.SIGHUP)  # what closing the terminal sends
    harness.wait(timeout=30)
    assert "stopped by SIGTERM" in log.read_text(), "the harness died without stopping its engine"


def test_a_harness_started_under_nohup_still_ignores_hangups():
    harness = start_harness("""
        import signal
        from types import SimpleNamespace
        from whichshot.entry import run_script

        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what nohup does
        run_script(SimpleNamespace(log=[], config={}), lambda _smk: print(signal.getsignal(signal.SIGHUP)))
    """)
    assert harness.communicate(timeout=60)[0].strip() == str(signal.SIG_IGN)
