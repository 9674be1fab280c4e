"""What refuses a shot's outcome before it is recorded as ok (each one line, the shot recorded as
failed with it): tokens that did not arrive over time, and drafts in a mode that drafts nothing."""

from whichshot.engine.base import ShotOutcome
from whichshot.errors import WhichshotError
from whichshot.measure.timing import check_arrived_over_time
from whichshot.shots.axes import NO_DRAFT


class DraftedWithoutMode(WhichshotError):
    """The engine drafted in a shot of the mode without drafting: it is not that mode's speed."""


def check_outcome(spec_mode: str, outcome: ShotOutcome, prompt_tokens: int | None = None) -> None:
    """Refuse an outcome that cannot be recorded as a shot of this mode, timed by our clock."""
    if spec_mode == NO_DRAFT:
        check_no_drafts(outcome)
        check_one_token_per_step(outcome)
    accepted = accepted_drafts(spec_mode, outcome)
    check_arrived_over_time(outcome.token_events, outcome.token_event_deliveries, accepted,
                            outcome.t_request_s, outcome.t_end_s, prompt_tokens)  # fmt: skip


def accepted_drafts(spec_mode: str, outcome: ShotOutcome) -> float | None:
    """The draft tokens the engine says it accepted in this shot (0 in the mode without drafting,
    once check_no_drafts passed); None where a drafting engine does not say."""
    if spec_mode == NO_DRAFT:
        return 0
    for said in (
        outcome.engine_timings.get("draft_n_accepted"),
        outcome.server_counters.get("accepted_tokens"),
    ):
        if said is not None:
            return said
    return None


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


def draft_count_declared(outcome: ShotOutcome) -> bool:
    """Whether the engine said how many tokens it drafted in the shot (its timings or its counters)."""
    return (
        outcome.engine_timings.get("draft_n") is not None
        or outcome.server_counters.get("draft_tokens") is not None
    )


# A plain decoder makes one token per step and sends it as one event. A step's event carries two
# where the server held back a token that ended inside a UTF-8 character (llama-server): in most text
# a few per cent of the events, never most of them. A drafting server's events carry each step's
# accepted drafts too: 2-4 tokens per event at the acceptance rates seen here. Above this mean, an
# engine that declares no draft count is taken to draft.
UNDECLARED_TOKENS_PER_EVENT_MAX = 1.5


def check_one_token_per_step(outcome: ShotOutcome) -> None:
    """A shot of the mode without drafting, from a server whose flags are the user's (an openai
    engine) and that reports no draft count (SGLang, TGI, vLLM with its metrics off), whose token
    events carry more than UNDECLARED_TOKENS_PER_EVENT_MAX tokens each on average: its speed is a
    drafting server's, refused rather than measured as none."""
    events = outcome.token_events
    tokens = sum(n for _t, n in events)
    if not outcome.drafting_unchosen or draft_count_declared(outcome) or not events:
        return  # an engine whichshot started with its own flags drafts only where a mode asks
    if tokens / len(events) <= UNDECLARED_TOKENS_PER_EVENT_MAX:
        return
    raise DraftedWithoutMode(
        f"its {len(events)} token events carried {tokens} tokens ({tokens / len(events):.2f} each, above "
        f"{UNDECLARED_TOKENS_PER_EVENT_MAX:g}) in a shot of mode {NO_DRAFT}, and the server reports no draft "
        "count: it drafts without saying so; start it without drafting to measure none, or expose its "
        "draft counters (/metrics)"
    )
