"""The decode steps of one verify-probe request (measure/verify_probe.py), from the engine's own
readings, and the request's median steady step at the point it timed (the one-token step; a verify
width with every draft accepted, or none). The probe reads them while it runs (to repeat until its
requests agree) and figures/step_probe.py reads them back from the files.

A step's time, as llama-server keeps it, runs from the end of the step before to the end of its own
sampling: it holds the sending of the step before's tokens. A steady step is one whose drafts and
acceptance are the point's and whose step before emitted as many tokens (the first step follows the
first token, one token): its time is the point's cost in a run of such steps, as a series pays it."""

import statistics
from dataclasses import dataclass

ACCEPT_NONE, ACCEPT_ALL = "accept_none", "accept_all"
ONE_TOKEN_WIDTH = 2  # a block of 2 repeats: the drafter finds no draft of its minimum length
# A request's median needs this many steady steps (fewer: the request gives no sample).
MIN_STEADY_STEPS = 3


@dataclass(frozen=True)
class Step:
    """One decode step of a probe request: its time and its tokens, by the engine's count."""

    ms: float
    emitted: int
    drafted: int
    accepted: int


def steps_of(readings: list[list[float]]) -> list[Step]:
    """The steps between consecutive readings ([tokens, ms, drafted, accepted] so far, the first
    at the first token)."""
    return [
        Step(b[1] - a[1], int(b[0] - a[0]), int(b[2] - a[2]), int(b[3] - a[3]))
        for a, b in zip(readings, readings[1:], strict=False)
    ]


def point_shape(server: str, width: int) -> Step:
    """The tokens of a steady step at a point (its ms left 0): drafts, acceptance, tokens emitted."""
    drafted = 0 if width == ONE_TOKEN_WIDTH else width - 1
    accepted = drafted if server == ACCEPT_ALL else 0
    return Step(0.0, accepted + 1, drafted, accepted)


def steady_median_ms(readings: list[list[float]], server: str, width: int) -> float | None:
    """The median time of a request's steady steps at the point (None: too few of them)."""
    shape = point_shape(server, width)
    steps = steps_of(readings)
    emitted_before = [int(readings[0][0]), *(s.emitted for s in steps)] if readings else []
    steady = [
        s.ms
        for s, before in zip(steps, emitted_before, strict=False)
        if (s.emitted, s.drafted, s.accepted) == (shape.emitted, shape.drafted, shape.accepted)
        and before == shape.emitted
    ]
    return statistics.median(steady) if len(steady) >= MIN_STEADY_STEPS else None
