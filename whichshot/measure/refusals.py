"""What refuses a shot's outcome before it is recorded as ok (each one line, the shot recorded as
failed with it): tokens that did not arrive over time, and drafts in a mode that drafts nothing."""

from whichshot.engine.base import ShotOutcome
from whichshot.errors import WhichshotError
from whichshot.measure.timing import check_arrived_over_time
from whichshot.shots.axes import NO_DRAFT


class DraftedWithoutMode(WhichshotError):
    """The engine drafted in a shot of the mode without drafting: it is not that mode's speed."""


def check_outcome(spec_mode: str, outcome: ShotOutcome) -> None:
    """Refuse an outcome that cannot be recorded as a shot of this mode, timed by our clock."""
    check_arrived_over_time(outcome.token_events, outcome.token_deliveries)
    if spec_mode == NO_DRAFT:
        check_no_drafts(outcome)


def check_no_drafts(outcome: ShotOutcome) -> None:
    """A shot of the mode without drafting whose engine says it drafted (its own count for the
    request, or its process-wide counter over the shot) is refused: an attached server started with
    speculative decoding would otherwise be measured as `none`."""
    counts = {
        "its timings' draft_n": outcome.engine_timings.get("draft_n"),
        "its /metrics draft-token counter": outcome.server_counters.get("draft_tokens"),
    }
    drafted = {where: n for where, n in counts.items() if n}
    if drafted:
        said = ", ".join(f"{n:g} by {where}" for where, n in drafted.items())
        raise DraftedWithoutMode(
            f"the engine drafted tokens in a shot of mode {NO_DRAFT} ({said}): the server runs speculative "
            "decoding of its own; start it without drafting to measure none, or name its drafting as a mode"
        )
