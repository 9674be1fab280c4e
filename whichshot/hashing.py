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
