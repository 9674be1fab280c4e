"""macOS telemetry from the text output of Apple's `powermetrics` (needs root).

powermetrics reports averages over its own sample window, so a value belongs to the window
[t_mono_s, t_mono_s + window] rather than to an instant.
"""

import re
import shutil
import subprocess
import sys
from collections.abc import Callable

from whichshot.telemetry.base import MAC_COLUMNS, Reading, SensorValue, error_text, not_readable

BACKEND = "powermetrics"
SAMPLE_HEADER = "*** Sampled system activity"
DEFAULT_WINDOW_MS = 100

_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
_POWER_UNIT = r"\s*(mW|W)\b"
# column -> patterns tried in order; the first that matches wins.
_PATTERNS: dict[str, tuple[re.Pattern[str], ...]] = {
    "mac_cpu_power_w": (re.compile(rf"^CPU Power:\s*{_NUMBER}{_POWER_UNIT}", re.M),),
    "mac_gpu_power_w": (re.compile(rf"^GPU Power:\s*{_NUMBER}{_POWER_UNIT}", re.M),),
    "mac_package_power_w": (
        re.compile(rf"^Combined Power \(CPU \+ GPU \+ ANE\):\s*{_NUMBER}{_POWER_UNIT}", re.M),
        # Intel Macs print a package total under this label instead.
        re.compile(rf"^Package Power:\s*{_NUMBER}{_POWER_UNIT}", re.M),
    ),
    "mac_gpu_freq_mhz": (re.compile(rf"^GPU (?:HW )?active frequency:\s*{_NUMBER}\s*MHz", re.M),),
}


def last_sample(text: str) -> str:
    """The last '*** Sampled system activity' block of powermetrics output (all of it if none)."""
    start = text.rfind(SAMPLE_HEADER)
    return text if start < 0 else text[start:]


def _to_base_unit(number: str, unit: str | None) -> float:
    value = float(number)
    return value / 1000.0 if unit == "mW" else value


def parse_powermetrics(text: str) -> dict[str, float | None]:
    """Power (W) and GPU frequency (MHz) of the last sample in powermetrics text output."""
    block = last_sample(text)
    parsed: dict[str, float | None] = dict.fromkeys(MAC_COLUMNS)
    for column, patterns in _PATTERNS.items():
        for pattern in patterns:
            match = pattern.search(block)
            if match:
                unit = match.group(2) if match.lastindex and match.lastindex >= 2 else None
                parsed[column] = _to_base_unit(match.group(1), unit)
                break
    return parsed


def powermetrics_argv(window_ms: int = DEFAULT_WINDOW_MS) -> list[str]:
    """Argument list for one powermetrics sample of window_ms."""
    return ["powermetrics", "--samplers", "cpu_power,gpu_power", "-i", str(window_ms), "-n", "1"]


def run_powermetrics(window_ms: int = DEFAULT_WINDOW_MS) -> str:
    """Run powermetrics once and return its stdout; raises on failure or after 5 s + window."""
    result = subprocess.run(
        powermetrics_argv(window_ms),
        capture_output=True,
        text=True,
        timeout=5 + window_ms / 1000.0,
        check=True,
    )
    return result.stdout


class PowermetricsBackend:
    """Apple CPU/GPU/package power and GPU frequency, one powermetrics run per read."""

    name = BACKEND
    columns = MAC_COLUMNS

    def __init__(
        self,
        window_ms: int = DEFAULT_WINDOW_MS,
        runner: Callable[[int], str] = run_powermetrics,
        unreadable: frozenset[str] = frozenset(),
    ) -> None:
        self._window_ms = window_ms
        self._runner = runner
        self._unreadable = unreadable  # missing at open: already a caveat, not a gap

    def read(self, full: bool = False) -> Reading:
        """Run powermetrics once (blocks for its window); a line gone missing is an error."""
        values: dict[str, SensorValue] = dict(parse_powermetrics(self._runner(self._window_ms)))
        errors = {
            column: "line not in powermetrics output"
            for column, value in values.items()
            if value is None and column not in self._unreadable
        }
        return Reading(values, errors)

    def close(self) -> None:
        """Nothing is held between reads."""


def open_powermetrics(
    window_ms: int = DEFAULT_WINDOW_MS,
) -> tuple[PowermetricsBackend | None, list[dict[str, str]]]:
    """The powermetrics backend if this is macOS, powermetrics exists and one run parses."""
    if sys.platform != "darwin":
        return None, not_readable(MAC_COLUMNS, BACKEND, f"not macOS ({sys.platform})")
    if shutil.which("powermetrics") is None:
        return None, not_readable(MAC_COLUMNS, BACKEND, "powermetrics not found on PATH")
    try:
        parsed = parse_powermetrics(run_powermetrics(window_ms))
    except (OSError, subprocess.SubprocessError) as exc:
        reason = f"powermetrics failed (it needs root): {error_text(exc)}"
        return None, not_readable(MAC_COLUMNS, BACKEND, reason)
    missing = tuple(column for column, value in parsed.items() if value is None)
    caveats = not_readable(missing, BACKEND, "line not in powermetrics output on this Mac")
    return PowermetricsBackend(window_ms, unreadable=frozenset(missing)), caveats
