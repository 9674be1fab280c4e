"""Fetch pinned distributions with pip itself (the ordinary client, its index and its cache)."""

import subprocess
import sys
from pathlib import Path

from whichshot.errors import ChecksumMismatch, WhichshotError
from whichshot.hashing import sha256_file


def download(name: str, version: str, dest: Path, *, sdist: bool = False) -> Path:
    """Download `name==version` (no dependencies) into `dest`; return the file's path."""
    dest.mkdir(parents=True, exist_ok=True)
    existing = _find(dest, name, version)
    if existing:
        return existing
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check"]
    # --no-binary names only this distribution: with :all:, pip also builds the sdist's own build
    # requirements from source to read its metadata (about 90 s for llama-cpp-python, 12 s like this).
    argv += ["--no-binary", name] if sdist else ["--only-binary", ":all:"]
    argv += ["-d", str(dest), f"{name}=={version}"]
    result = subprocess.run(argv, capture_output=True, text=True)
    found = _find(dest, name, version)
    if result.returncode != 0 or not found:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise WhichshotError(f"could not download {name}=={version} with pip: {last}")
    return found


def verify_sha256(path: Path, expected: str, what: str) -> None:
    """Refuse a file whose sha256 is not the pinned one."""
    actual = sha256_file(path)
    if actual != expected.lower():
        raise ChecksumMismatch(
            f"{what}: sha256 of {path} is {actual}, config pins {expected}; refusing to use it"
        )


def _find(dest: Path, name: str, version: str) -> Path | None:
    stem = name.replace("-", "_").lower()
    for path in sorted(dest.iterdir()):
        lowered = path.name.lower().replace("-", "_")
        if lowered.startswith(f"{stem}_{version}") and path.suffix in {".whl", ".gz", ".zip"}:
            return path
    return None
