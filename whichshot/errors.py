"""Errors a user can act on: shown as one line, never as a traceback."""


class WhichshotError(Exception):
    """A problem with input, environment or engine that the user can fix."""


def invalid_config(where: str, problem: str) -> WhichshotError:
    """The one-line refusal of a config: the field, then what is wrong with it."""
    return WhichshotError(f"invalid config: {where}: {problem}")


class EngineNotReady(WhichshotError):
    """The engine process did not become ready in time, or exited while starting."""


class EngineDied(WhichshotError):
    """The engine process exited while serving a shot."""


class ChecksumMismatch(WhichshotError):
    """A fetched or local file does not have the pinned sha256."""
