"""The engine process that cuts prompts: started with the smallest window (tokenizing needs no
context), stopped whatever happens."""

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from whichshot.engine import load_engine
from whichshot.engine.base import RunningEngine
from whichshot.engine.settings import server_settings


@dataclass(frozen=True)
class Tokenizer:
    server: RunningEngine
    bos_token_id: int | None  # prepended to plain prompts where the model adds one
    has_chat_template: bool


@contextlib.contextmanager
def tokenizing_engine(
    engine_spec: dict[str, Any], server_spec: dict[str, Any], build: dict[str, Any], model: dict[str, Any],
    log_path: Path,
) -> Iterator[Tokenizer]:  # fmt: skip
    meta = model["metadata"]
    engine = load_engine(engine_spec["kind"])
    settings = replace(server_settings(engine_spec, server_spec, context_tokens=512), tokenize_only=True)
    server = engine.start(build, Path(model["path"]), settings, log_path)
    try:
        bos = meta["bos_token_id"] if meta.get("add_bos_token") else None
        yield Tokenizer(server, bos, meta["has_chat_template"])
    finally:
        server.stop()
