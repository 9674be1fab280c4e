"""The speed-up over the shared prefix (issue 50): up to its first divergence a drafted output is the
undrafted one's text, so its decode speed there compares like for like even where the whole outputs
part. Both timed by our clock, from each shot's token arrival times (token_arrival_s)."""

from typing import Any


def prefix_span_s(arrivals: list[float], tokens: int) -> float | None:
    """Seconds from the first token's arrival to the `tokens`-th's (None: fewer than two tokens)."""
    if tokens < 2 or len(arrivals) < tokens:
        return None
    return arrivals[tokens - 1] - arrivals[0]


def shared_prefix_speedup(
    drafted: dict[str, Any], undrafted: dict[str, Any], tokens: int | None
) -> float | None:
    """The undrafted shot's decode time over the first `tokens` tokens divided by the drafted shot's
    (the decode speed-up over that prefix); None where either was not timed or the prefix is too short."""
    if tokens is None:
        return None
    fast = prefix_span_s(list(drafted.get("token_arrival_s") or []), tokens)
    slow = prefix_span_s(list(undrafted.get("token_arrival_s") or []), tokens)
    if fast is None or slow is None or fast <= 0:
        return None
    return slow / fast
