"""Client-side timings of one streamed shot, from the arrival time of each token."""

from dataclasses import dataclass

from whichshot.errors import WhichshotError


class StreamNotTimed(WhichshotError):
    """The tokens did not arrive as the engine made them (a buffering proxy): no timing holds."""


@dataclass(frozen=True)
class ClientTimings:
    """What our own clock saw. Seconds on the monotonic clock; tok/s derived from them."""

    ttft_s: float | None
    prefill_tok_s: float | None
    decode_tok_s: float | None
    e2e_s: float
    output_tokens: int
    decode_span_s: float | None
    decode_tokens: int  # tokens that arrived after the first token: what decode_span_s timed


def token_arrival_times(events: list[tuple[float, int]]) -> list[float]:
    """Expand (arrival time, tokens in event) into one arrival time per token."""
    times: list[float] = []
    for t_arrival_s, n_tokens in events:
        times.extend([t_arrival_s] * n_tokens)
    return times


def check_arrived_over_time(events: list[tuple[float, int]], deliveries: int | None) -> None:
    """Refuse (StreamNotTimed, one line) a stream whose token events all came in one delivery
    (engine.sse: each read after the first found its bytes already there): a proxy that buffers the
    whole stream (nginx's default) hands it over at once, and TTFT would be the end-to-end time,
    decode speed the client's parsing speed. Tokens that come together within a stream are no
    reason to refuse: a verified draft's do (llama-server sends them as events back to back, vLLM
    as one event of 8-9), and each is timed by its event. A proxy that flushes in several pieces is
    not caught here; the client's decode speed against the engine's own (client_vs_engine figures)
    shows it. deliveries None: the engine's stream does not say (nothing is refused)."""
    if deliveries == 1 and len(events) >= 2:
        raise StreamNotTimed(
            f"all {len(events)} token events ({sum(n for _t, n in events)} tokens) came in one delivery, "
            "each read finding them already there: something between the server and whichshot "
            "buffered the stream (a proxy: turn its buffering off, e.g. nginx proxy_buffering off), so "
            "no time of this shot is the engine's"
        )


def client_timings(
    t_request_s: float, token_times_s: list[float], t_end_s: float, prompt_tokens: int
) -> ClientTimings:
    """TTFT, prefill and decode speed as a client measures them.

    prefill tok/s = prompt tokens / TTFT (TTFT includes one decode step and HTTP overhead);
    decode tok/s = (tokens that arrived after the first token) / (last arrival - first arrival):
    tokens that came in the first token's event were made before the span began.
    """
    n_tokens = len(token_times_s)
    ttft_s = token_times_s[0] - t_request_s if n_tokens else None
    prefill = prompt_tokens / ttft_s if ttft_s and ttft_s > 0 else None
    span_s = token_times_s[-1] - token_times_s[0] if n_tokens >= 2 else None
    after_first = sum(t > token_times_s[0] for t in token_times_s)
    decode = after_first / span_s if span_s and span_s > 0 else None
    return ClientTimings(
        ttft_s=ttft_s,
        prefill_tok_s=prefill,
        decode_tok_s=decode,
        e2e_s=t_end_s - t_request_s,
        output_tokens=n_tokens,
        decode_span_s=span_s,
        decode_tokens=after_first,
    )
