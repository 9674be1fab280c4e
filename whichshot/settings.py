"""ServerSettings from the config's engine and server sections."""

from typing import Any

from engines.base import ServerSettings


def server_settings(
    engine: dict[str, Any], server: dict[str, Any], context_tokens: int, extra_args: tuple[str, ...] = ()
) -> ServerSettings:
    """How every process of this engine is started."""
    return ServerSettings(
        threads=engine.get("threads", 2),
        context_tokens=context_tokens,
        port=server.get("port", 0),
        ready_timeout_s=server.get("ready_timeout_s", 180),
        gpu_layers=engine.get("gpu_layers", 0),
        extra_args=extra_args,
    )
