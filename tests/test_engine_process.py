"""Engine processes: tied to the harness without Python between fork and exec, and refused when
they listen beyond loopback, whatever their kind or arguments."""

import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import psutil
import pytest

from tests.fault_kit import child_processes
from whichshot.engine import process as process_module
from whichshot.engine.process import EngineProcess, free_port, start_until_ready
from whichshot.errors import WhichshotError


def http_server_argv(tmp_path, bind: str, port: int) -> list[str]:
    return [sys.executable, "-m", "http.server", "--bind", bind, str(port), "--directory", str(tmp_path)]


def serving(tmp_path, bind: str) -> EngineProcess:
    port = free_port()
    engine, _ready_s = start_until_ready(
        http_server_argv(tmp_path, bind, port), tmp_path / "server.log", f"http://127.0.0.1:{port}/", 30
    )
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
        from whichshot.engine.process import EngineProcess
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


class _Healthy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 -- http.server's naming
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


def test_a_port_another_program_answers_on_is_refused_and_the_engine_stopped(tmp_path):
    foreign = HTTPServer(("127.0.0.1", 0), _Healthy)  # not the engine's: a socket of this test's own
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    port = foreign.server_address[1]
    # The engine is told `port` but binds another, as if it had died and `foreign` had taken the port.
    argv = http_server_argv(tmp_path, "127.0.0.1", free_port())
    before = {p.pid for p in child_processes()}
    try:
        with pytest.raises(WhichshotError, match=rf"^port {port} answers, but no process the engine started"):
            start_until_ready(argv, tmp_path / "server.log", f"http://127.0.0.1:{port}/health", 30)
    finally:
        foreign.shutdown()
        foreign.server_close()
    assert (tmp_path / "server.log").exists()  # the engine was started, then stopped with its watchdog
    assert [p for p in child_processes() if p.pid not in before] == []


def test_a_tied_run_past_its_time_is_stopped_with_what_it_started(tmp_path):
    marker = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {marker}; wait"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        process_module.run_tied(["bash", "-c", script], timeout_s=1.0)
    assert time.monotonic() - started < 20
    child = int(marker.read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
