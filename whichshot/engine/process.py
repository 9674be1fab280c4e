"""Engine processes: started from argument lists, bound to our lifetime, always reaped."""

import contextlib
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import requests

from whichshot.errors import EngineDied, EngineNotReady, WhichshotError
from whichshot.telemetry.gpus import PCI_ORDER

LOOPBACK = "127.0.0.1"
_STOP_GRACE_S = 10.0


def tied_to_us(argv: list[str]) -> list[str]:
    """argv run through util-linux's setpriv with a parent-death signal: if the harness is
    SIGKILLed, the kernel kills the engine too, so no server outlives its job. (Not a preexec_fn:
    that runs Python between fork and exec, unsafe while the telemetry thread runs.) Without
    setpriv the engine runs as it is, left to ProcessGroup's watchdog."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else list(argv)


# The parent-death signal reaches the group's leader alone, not the processes it starts: this
# watchdog SIGKILLs the whole group once the pipe that only the harness holds open reads EOF,
# which happens however the harness ends. It wakes each second to leave once the group is gone.
_GROUP_WATCHDOG = """
import os, select, signal, sys
pgid = int(sys.argv[1])

def group_exists():
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True

while group_exists():
    if select.select([0], [], [], 1.0)[0] and not os.read(0, 64):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
        break
"""


class ProcessGroup:
    """A child in its own session whose whole process group, every process it starts included, dies
    with the harness however the harness ends (SIGKILL too): setpriv's parent-death signal for the
    leader, a watchdog process for the rest."""

    def __init__(self, argv: list[str], **popen_kwargs: object) -> None:
        self.popen = subprocess.Popen(tied_to_us(argv), start_new_session=True, **popen_kwargs)
        self._stopped = False
        read_fd, self._watchdog_pipe = os.pipe()  # both ends close on exec: no other child holds them
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _GROUP_WATCHDOG, str(self.popen.pid)],
                stdin=read_fd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C is not for it
            )
        except BaseException:
            os.close(self._watchdog_pipe)
            self._kill_group()
            self.popen.wait()
            raise
        finally:
            os.close(read_fd)

    def stop(self, grace_s: float) -> int | None:
        """SIGTERM the group, SIGKILL after grace_s, then SIGKILL what the leader left behind;
        return the leader's exit code."""
        if self._stopped:
            return self.popen.returncode
        if self.popen.poll() is None:
            _signal_group(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._kill_group()
                self.popen.wait()
        # The group's id stays reserved while any member lives, so this reaches only the leader's own.
        self._kill_group()
        self._stopped = True
        os.close(self._watchdog_pipe)
        self._watchdog.wait()
        return self.popen.returncode

    def _kill_group(self) -> None:
        _signal_group(self.popen.pid, signal.SIGKILL)


def run_tied(
    argv: list[str], env: dict[str, str] | None = None, timeout_s: float | None = None
) -> subprocess.CompletedProcess[str]:
    """argv run to its end with its output captured as text, its process group tied to the harness
    like an engine's: stopped, with all it started, if the harness is interrupted or dies, or after
    timeout_s (subprocess.TimeoutExpired). env: the whole environment it gets (None: ours)."""
    group = ProcessGroup(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        stdout, stderr = group.popen.communicate(timeout=timeout_s)
    finally:
        group.stop(_STOP_GRACE_S)
    return subprocess.CompletedProcess(argv, group.popen.returncode, stdout, stderr)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def ensure_port_free(port: int) -> None:
    """Refuse a configured port that another process holds."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError as exc:
            raise WhichshotError(
                f"port {port} on {LOOPBACK} is already in use ({exc.strerror}); "
                "free it or set server.port: 0 to pick a free one"
            ) from None


def process_tree(pid: int) -> list[psutil.Process]:
    """A process and all its descendants ([] once it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def in_pci_order(env: dict[str, str] | None) -> dict[str, str]:
    """The engine's environment with CUDA numbering GPUs in PCI bus order unless it says otherwise:
    then the engine's CUDA device k is known to NVML (telemetry/gpus.py)."""
    env = dict(os.environ if env is None else env)
    env.setdefault("CUDA_DEVICE_ORDER", PCI_ORDER)
    return env


class EngineProcess:
    """One start of an engine: a process group tied to the harness (ProcessGroup), logging to a file."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 -- held for the process lifetime
        self.log_offset = self._log.tell()  # where this process's lines start (a rerun appends)
        self.t_spawn_s = time.monotonic()
        self._group = ProcessGroup(
            argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=in_pci_order(env)
        )
        self.popen = self._group.popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def exited(self, grace_s: float = 1.0) -> bool:
        """Whether the process has exited, waiting up to grace_s for it.

        A killed engine closes its sockets a moment before the kernel reports it dead, so a
        client that sees the connection drop asks too early with alive() alone.
        """
        try:
            self.popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def request_failure(self, exc: Exception) -> WhichshotError:
        """What a failed request means: the engine died during it, or the request itself failed."""
        if self.exited(grace_s=1.0):
            return EngineDied(
                f"engine exited with {self.exit_description()} during the shot (log {self.log_path})"
            )
        return WhichshotError(f"request failed: {exc}")

    def exit_description(self) -> str:
        """'code 1' or 'signal SIGKILL': how the process ended (call once it has)."""
        code = self.popen.returncode
        if code is not None and code < 0:
            return f"signal {signal.Signals(-code).name}"
        return f"code {code}"

    def log_tail(self, lines: int = 15) -> str:
        """The last lines the engine wrote, for error messages."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_ready(self, is_ready: Callable[[], bool], timeout_s: float) -> float:
        """Poll `is_ready` every 100 ms; return seconds from spawn to ready."""
        deadline = self.t_spawn_s + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                raise EngineNotReady(
                    f"engine exited with {self.exit_description()} while starting "
                    f"(log {self.log_path}): {self._last_line()}"
                )
            if is_ready():
                return time.monotonic() - self.t_spawn_s
            time.sleep(0.1)
        self.stop()
        raise EngineNotReady(
            f"engine not ready after {timeout_s:.0f} s (log {self.log_path}): {self._last_line()}"
        )

    def listening(self) -> list[str]:
        """'address:port' of every socket the engine's process tree listens on."""
        found = []
        for process in process_tree(self.pid):
            with contextlib.suppress(psutil.NoSuchProcess):
                for conn in process.net_connections(kind="inet"):
                    if conn.status == psutil.CONN_LISTEN:
                        found.append(f"{conn.laddr.ip}:{conn.laddr.port}")
        return found

    def check_serving(self, port: int) -> None:
        """Refuse (and stop) an engine that listens anywhere but on loopback, or whose process tree
        holds no socket listening on `port` (what answered there is another program): whatever its
        kind or its arguments say, the sockets it holds decide."""
        listening = self.listening()
        exposed = [a for a in listening if not ipaddress.ip_address(a.rpartition(":")[0]).is_loopback]
        if exposed:
            self.stop()
            raise WhichshotError(
                f"engine listens beyond loopback on {', '.join(exposed)}: refused (it must bind {LOOPBACK})"
            )
        if not any(int(a.rpartition(":")[2]) == port for a in listening):
            self.stop()
            raise WhichshotError(
                f"port {port} answers, but no process the engine started listens on it (it listens on "
                f"{', '.join(listening) or 'nothing'}): refused, another program would be measured "
                f"(log {self.log_path})"
            )

    def _last_line(self) -> str:
        """The first error line of the log's tail (the cause; later ones echo it), else its last line."""
        tail = [line for line in self.log_tail(80).splitlines() if line.strip()]
        errors = [line for line in tail if " E " in line or "error" in line.lower()]
        return (errors[:1] or tail[-1:] or ["<empty log>"])[0].strip()

    def stop(self) -> int | None:
        """Stop the whole process group (ProcessGroup.stop); return the engine's exit code."""
        code = self._group.stop(_STOP_GRACE_S)
        self._log.close()
        return code

    def __enter__(self) -> "EngineProcess":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def http_ok(url: str, timeout_s: float = 1.0, headers: dict[str, str] | None = None) -> bool:
    """True when GET `url` answers 200."""
    try:
        return requests.get(url, timeout=timeout_s, headers=headers).status_code == 200
    except requests.RequestException:
        return False


def start_until_ready(
    argv: list[str],
    log_path: Path,
    health_url: str,
    timeout_s: float,
    env: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[EngineProcess, float]:
    """Start an engine and wait for its health URL, then check that the engine itself answered
    there, on loopback only (check_serving); a process that fails either is stopped."""
    process = EngineProcess(argv, log_path, env=env)
    try:
        ready_s = process.wait_ready(lambda: http_ok(health_url, headers=headers), timeout_s)
        process.check_serving(urlsplit(health_url).port)
        return process, ready_s
    except BaseException:
        process.stop()
        raise
