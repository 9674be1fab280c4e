"""The per-user cache shared by every clone: engine builds, sources, models."""

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from whichshot.atomic import write_json_atomic
from whichshot.hashing import package_code_id


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


def derived_from_file(
    cache: Path, kind: str, sha256: str, derive: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """What `derive` reads out of a file pinned by its sha256 (a GGUF's metadata, its per-token
    costs): kept in the cache under that hash and the code that reads it, so that every later run
    on the same file skips the parse (seconds per model file)."""
    path = cache / "derived" / kind / f"{sha256}-{package_code_id('prepare', 'shots')}.json"
    if path.is_file():
        return json.loads(path.read_text())
    record = derive()
    write_json_atomic(path, record)
    return record
