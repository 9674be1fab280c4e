"""Engine processes: started from argument lists, bound to our lifetime, always reaped."""

import contextlib
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

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
    setpriv the engine runs as it is, stopped by the harness itself."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else list(argv)


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
    """One start of an engine: a child in its own session, logging to a file."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 -- held for the process lifetime
        self.t_spawn_s = time.monotonic()
        self.popen = subprocess.Popen(
            tied_to_us(argv),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=in_pci_order(env),
            start_new_session=True,
        )

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
                ready_s = time.monotonic() - self.t_spawn_s
                self.check_loopback_only()
                return ready_s
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

    def check_loopback_only(self) -> None:
        """Refuse (and stop) an engine listening anywhere but on loopback: whatever its kind or
        its arguments say, the sockets it holds decide."""
        exposed = [a for a in self.listening() if not ipaddress.ip_address(a.rpartition(":")[0]).is_loopback]
        if exposed:
            self.stop()
            raise WhichshotError(
                f"engine listens beyond loopback on {', '.join(exposed)}: refused (it must bind {LOOPBACK})"
            )

    def _last_line(self) -> str:
        """The first error line of the log's tail (the cause; later ones echo it), else its last line."""
        tail = [line for line in self.log_tail(80).splitlines() if line.strip()]
        errors = [line for line in tail if " E " in line or "error" in line.lower()]
        return (errors[:1] or tail[-1:] or ["<empty log>"])[0].strip()

    def stop(self) -> int | None:
        """SIGTERM the process group, SIGKILL after a grace period; return the exit code."""
        if self.alive():
            _signal_group(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        self._log.close()
        return self.popen.returncode

    def __enter__(self) -> "EngineProcess":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def http_ok(url: str, timeout_s: float = 1.0) -> bool:
    """True when GET `url` answers 200."""
    try:
        return requests.get(url, timeout=timeout_s).status_code == 200
    except requests.RequestException:
        return False


def start_until_ready(
    argv: list[str], log_path: Path, health_url: str, timeout_s: float, env: dict[str, str] | None = None
) -> tuple[EngineProcess, float]:
    """Start an engine and wait for its health URL; a process that never gets ready is stopped."""
    process = EngineProcess(argv, log_path, env=env)
    try:
        return process, process.wait_ready(lambda: http_ok(health_url), timeout_s)
    except BaseException:
        process.stop()
        raise
