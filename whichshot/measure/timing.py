"""Client-side timings of one streamed shot, from the arrival time of each token."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ClientTimings:
    """What our own clock saw. Seconds on the monotonic clock; tok/s derived from them."""

    ttft_s: float | None
    prefill_tok_s: float | None
    decode_tok_s: float | None
    e2e_s: float
    output_tokens: int
    decode_span_s: float | None


def token_arrival_times(events: list[tuple[float, int]]) -> list[float]:
    """Expand (arrival time, tokens in event) into one arrival time per token."""
    times: list[float] = []
    for t_arrival_s, n_tokens in events:
        times.extend([t_arrival_s] * n_tokens)
    return times


def client_timings(
    t_request_s: float, token_times_s: list[float], t_end_s: float, prompt_tokens: int
) -> ClientTimings:
    """TTFT, prefill and decode speed as a client measures them.

    prefill tok/s = prompt tokens / TTFT (TTFT includes one decode step and HTTP overhead);
    decode tok/s = (tokens after the first) / (last arrival - first arrival).
    """
    n_tokens = len(token_times_s)
    ttft_s = token_times_s[0] - t_request_s if n_tokens else None
    prefill = prompt_tokens / ttft_s if ttft_s and ttft_s > 0 else None
    span_s = token_times_s[-1] - token_times_s[0] if n_tokens >= 2 else None
    decode = (n_tokens - 1) / span_s if span_s and span_s > 0 else None
    return ClientTimings(
        ttft_s=ttft_s,
        prefill_tok_s=prefill,
        decode_tok_s=decode,
        e2e_s=t_end_s - t_request_s,
        output_tokens=n_tokens,
        decode_span_s=span_s,
    )
