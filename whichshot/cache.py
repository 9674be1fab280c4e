"""The per-user cache shared by every clone: engine builds, sources, models."""

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_root(configured: str | None = None) -> Path:
    """Config value, else $WHICHSHOT_CACHE, else $XDG_CACHE_HOME/whichshot or ~/.cache/whichshot."""
    if configured:
        root = Path(configured).expanduser()
    elif os.environ.get("WHICHSHOT_CACHE"):
        root = Path(os.environ["WHICHSHOT_CACHE"]).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = Path(xdg) / "whichshot"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Hold an advisory lock so two clones never build or fetch the same thing at once."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
