"""One measurement at a time on a machine, whatever scheduled it.

The workflow profile's measurement slot keeps Snakemake from starting two measurement jobs at once,
but only where that profile is loaded; two runs started by hand, or a run without the profile, would
still overlap and measure each other's load. Every measurement also holds this lock: an advisory
lock file in the machine's own temporary directory (node-local on a cluster), held for the whole
series, so a second measurement waits for the first to finish."""

import contextlib
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

from whichshot.cache import exclusive_lock


def lock_path() -> Path:
    """The lock file: per machine and user (another user's jobs are not ours to order). Its name
    holds the host name as well: nodes that share a temporary directory (simulated nodes on one
    machine, or a site whose /tmp is a network filesystem) must not queue behind each other."""
    host = socket.gethostname().split(".")[0] or "localhost"
    return Path(tempfile.gettempdir()) / f"whichshot-measurement-{os.getuid()}-{host}.lock"


@contextlib.contextmanager
def measurement_lock() -> Iterator[None]:
    """Hold the machine's measurement lock (waiting for the measurement that holds it)."""
    with exclusive_lock(lock_path()):
        yield
