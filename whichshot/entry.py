"""Shared start of every workflow script: log to the rule's log, one clear line on error."""

import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

from whichshot.engine import import_engine_modules
from whichshot.errors import WhichshotError
from whichshot.tell import tell


def _terminate(_signum: int, _frame: object) -> None:
    # Turn SIGTERM and SIGHUP (a closed terminal) into the same unwinding as Ctrl-C, so `finally`
    # blocks stop engines (a SIGKILL unwinds nothing: process.ProcessGroup's watchdog covers it).
    raise KeyboardInterrupt


def run_script(smk: Any, main: Callable[[Any], None]) -> None:
    """Run `main(snakemake)` with stderr in the rule's log; a WhichshotError exits with one line."""
    log_path = smk.log[0] if len(smk.log) else None
    if log_path:
        sys.stderr = sys.stdout = open(log_path, "a", buffering=1)  # noqa: SIM115
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    signal.signal(signal.SIGTERM, _terminate)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # nohup asked to outlive the terminal
        signal.signal(signal.SIGHUP, _terminate)
    # A process started in the background of a non-interactive shell inherits SIGINT ignored,
    # and Python then never raises KeyboardInterrupt: Ctrl-C must always unwind a measurement.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        import_engine_modules(smk.config.get("engine_modules") or [])  # kinds the config adds
        main(smk)
    except WhichshotError as exc:
        tell(f"whichshot: error: {exc}")
        sys.exit(1)
