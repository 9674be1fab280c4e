"""Settings as they are hashed and handed to Snakemake: every secret (as whichshot.redact finds them)
replaced by its HMAC-SHA256 under a key kept on this machine, never by a blank.

Hashing the real values tells settings apart that differ only in a secret-looking place (an API key,
but before issue 51 also --max-num-batched-tokens 512 vs 8192); keying the digest means a short
secret cannot be recovered from a shot's settings_sha256, a build id or .snakemake/metadata by
hashing guesses: that needs the key, a file readable by its owner only in whichshot's cache.
"""

import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from whichshot.cache import cache_root
from whichshot.redact import redact_engine

KEY_FILE = "settings-hmac.key"
KEY_BYTES = 32
PREFIX = "hmac-sha256:"


def local_key(root: Path | None = None) -> bytes:
    """This machine's key (made once, owner-only; a second process racing to make it reads the
    first's)."""
    path = (root or cache_root()) / KEY_FILE
    if not path.is_file():
        partial = path.with_name(f".{KEY_FILE}.{os.getpid()}")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(KEY_BYTES))
        try:
            os.link(partial, path)  # fails if another process made it first: theirs is kept
        except FileExistsError:
            pass
        finally:
            partial.unlink()
    return bytes.fromhex(path.read_text().strip())


def keyed_digest(secret: str, key: bytes) -> str:
    return PREFIX + hmac.new(key, secret.encode("utf-8"), hashlib.sha256).hexdigest()


def keyed_engine(spec: Mapping[str, Any], key: bytes | None = None) -> dict[str, Any]:
    """An engine's settings with each secret replaced by its keyed digest: safe to store, and
    different wherever the real settings differ."""
    # The key is read (made, the first time) only where a secret is found.
    return redact_engine(spec, lambda secret: keyed_digest(secret, key if key is not None else local_key()))
