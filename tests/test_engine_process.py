"""Engine processes: tied to the harness without Python between fork and exec, and refused when
they listen beyond loopback, whatever their kind or arguments."""

import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from whichshot.errors import WhichshotError
from whichshot.measure import process as process_module
from whichshot.measure.process import EngineProcess, free_port, http_ok


def serving(tmp_path, bind: str) -> EngineProcess:
    port = free_port()
    argv = [sys.executable, "-m", "http.server", "--bind", bind, str(port), "--directory", str(tmp_path)]
    engine = EngineProcess(argv, tmp_path / "server.log")
    engine.wait_ready(lambda: http_ok(f"http://127.0.0.1:{port}/"), 30)
    return engine


def test_an_engine_listening_beyond_loopback_is_refused_and_stopped(tmp_path):
    with pytest.raises(WhichshotError, match=r"engine listens beyond loopback on 0\.0\.0\.0:\d+: refused"):
        serving(tmp_path, "0.0.0.0")
    assert not [
        p for p in psutil.Process().children(recursive=True) if "http.server" in " ".join(p.cmdline())
    ]
    with serving(tmp_path, "127.0.0.1") as fine:
        assert fine.listening() and all(a.startswith("127.0.0.1:") for a in fine.listening())


def test_engines_start_without_a_preexec_function(tmp_path, monkeypatch):
    seen = {}
    real_popen = subprocess.Popen

    def recording_popen(argv, **kwargs):
        seen.update(kwargs)
        return real_popen(argv, **kwargs)

    monkeypatch.setattr(process_module.subprocess, "Popen", recording_popen)
    with EngineProcess([sys.executable, "-c", "pass"], tmp_path / "log"):
        pass
    assert "preexec_fn" not in seen and seen["start_new_session"] is True


def test_a_killed_harness_takes_its_engine_with_it(tmp_path):
    harness = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from whichshot.measure.process import EngineProcess
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        engine = EngineProcess(sleeper, Path({str(tmp_path / "e.log")!r}))
        print(engine.pid, flush=True)
        time.sleep(60)
    """)  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", harness], stdout=subprocess.PIPE, text=True)
    engine_pid = int(proc.stdout.readline())
    proc.kill()  # SIGKILL: no finally, no signal handler of ours runs
    proc.wait()
    deadline = time.monotonic() + 5
    while psutil.pid_exists(engine_pid) and psutil.Process(engine_pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the engine outlived its harness"
        time.sleep(0.05)
