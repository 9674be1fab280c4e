"""Errors a user can act on: shown as one line, never as a traceback."""


class WhichshotError(Exception):
    """A problem with input, environment or engine that the user can fix."""


class EngineNotReady(WhichshotError):
    """The engine process did not become ready in time, or exited while starting."""


class EngineDied(WhichshotError):
    """The engine process exited while serving a shot."""


class ChecksumMismatch(WhichshotError):
    """A fetched or local file does not have the pinned sha256."""
