"""Repeat a timed request until its samples hold still (the server's verify probe, issue 53).

On a GPU a decode step takes a few milliseconds, and what the host does beside one request moves
its median step by a tenth or more. So a point is first warmed up until two consecutive warm-up
requests agree within `settle_factor` (or `max_warm_ups` ran), then timed until its last
`repetitions` requests spread (slowest over fastest) at most `spread_limit` (or `max_repetitions`
timed requests ran). The last `repetitions` timed requests are the point's samples either way; the
spread and the counts are kept, so a point that never held still says so."""

from collections.abc import Callable
from dataclasses import dataclass

# A step-cost probe whose slowest timed repetition exceeds its fastest by more than this factor
# measured the machine's moods, not the step: it feeds no prediction. The cost model's target is
# 20 %; a probe that moves 25 % between repetitions cannot support it. (llama-bench's one-token
# repetitions on an H100 spread 3.3-3.8x.)
VERIFY_PROBE_SPREAD_LIMIT = 1.25


@dataclass(frozen=True)
class RepeatRule:
    """How long a point warms up and how often it is timed."""

    repetitions: int
    max_repetitions: int
    max_warm_ups: int
    settle_factor: float
    spread_limit: float = VERIFY_PROBE_SPREAD_LIMIT


@dataclass(frozen=True)
class Repeated:
    """A point's samples (None: a request that gave none), in the order they were taken."""

    warm_ups: list[float | None]
    timed: list[float | None]
    settled: bool  # the last two warm-ups agreed within the settle factor
    window: list[int]  # indices into `timed` of the point's samples: the last `repetitions`
    spread: float | None  # slowest over fastest of the window (None: a request in it gave no sample)
    steady: bool  # spread at most the limit


def spread(samples: list[float | None]) -> float | None:
    """Slowest over fastest (None: no samples, a missing one, or a time of 0)."""
    if not samples or any(s is None or s <= 0 for s in samples):
        return None
    return max(samples) / min(samples)  # type: ignore[type-var, operator]


def _within(samples: list[float | None], factor: float) -> bool:
    found = spread(samples)
    return found is not None and found <= factor


def repeat_until_steady(take: Callable[[bool], float | None], rule: RepeatRule) -> Repeated:
    """Call take(warm_up) for each request, warm-ups first, and stop as the rule says."""
    warm_ups: list[float | None] = []
    while len(warm_ups) < rule.max_warm_ups:
        warm_ups.append(take(True))
        if len(warm_ups) >= 2 and _within(warm_ups[-2:], rule.settle_factor):
            break
    timed: list[float | None] = []
    cap = max(rule.max_repetitions, rule.repetitions)
    while len(timed) < cap:
        timed.append(take(False))
        if len(timed) >= rule.repetitions and _within(timed[-rule.repetitions :], rule.spread_limit):
            break
    window = list(range(max(0, len(timed) - rule.repetitions), len(timed)))
    found = spread([timed[i] for i in window])
    settled = len(warm_ups) >= 2 and _within(warm_ups[-2:], rule.settle_factor)
    return Repeated(warm_ups, timed, settled, window, found, found is not None and found <= rule.spread_limit)
