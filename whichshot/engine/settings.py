"""ServerSettings from the config's engine and server sections."""

from typing import Any

from whichshot.engine.base import ServerSettings
from whichshot.shots.axes import DEFAULT_COMPILE_CACHE, DEFAULT_PREFILL_CHUNK, ONE_STREAM


def server_settings(
    engine: dict[str, Any],
    server: dict[str, Any],
    context_tokens: int,
    extra_args: tuple[str, ...] = (),
    warmup: str = "engine_default",
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
    streams: int = ONE_STREAM,
    compile_cache: str = DEFAULT_COMPILE_CACHE,
) -> ServerSettings:
    """How every process of this engine is started."""
    return ServerSettings(
        threads=engine["threads"],
        context_tokens=context_tokens,
        port=server["port"],
        ready_timeout_s=server["ready_timeout_s"],
        gpu_layers=engine.get("gpu_layers", 0),  # only llama_cpp engines have the key
        extra_args=extra_args,
        warmup=warmup,
        prefill_chunk=prefill_chunk,
        streams=streams,
        compile_cache=compile_cache,
        engine_spec=engine,
    )
