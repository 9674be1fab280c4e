"""Content hashes: sha256 of files and short ids of canonical JSON."""

import hashlib
import json
from pathlib import Path
from typing import Any

_BLOCK_BYTES = 1 << 20


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def sha256_text(text: str) -> str:
    """Hex sha256 of a string's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def short_id(value: Any, length: int = 12) -> str:
    """A short stable id of a JSON-serialisable value."""
    return sha256_text(canonical_json(value))[:length]


def package_code_id(*packages: str) -> str:
    """A short id of the source files of these whichshot subpackages: a rule that passes it as a
    param reruns when the code that makes its output changes (Snakemake tracks only the script)."""
    root = Path(__file__).resolve().parent
    files = sorted(f for name in packages for f in (root / name).glob("*.py"))
    return short_id({str(f.relative_to(root)): sha256_file(f) for f in files})
