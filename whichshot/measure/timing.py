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


# A token came "behind" where its event arrived in a delivery (engine.sse: the reads after one that
# waited) that had already brought an earlier token event: a plain decoder makes one step at a time
# and the client reads each step's event as it comes, so a delivery's first token event is on time
# and each later one came together with it. The tokens of one event left the engine together (a
# token held back inside a UTF-8 character, vLLM's verified drafts): they count as their event does.
# Only drafting explains events behind others (llama-server sends a step's verified drafts as
# events back to back), so the engine's accepted drafts are subtracted. A client that falls behind
# the engine (descheduled on a loaded host) also finds several events per read: on this 2-core
# machine under other sessions' load, a pass-through proxy's healthy stream of 64 tokens at ~300
# tok/s had 38 behind (59 %). A proxy that passes the answer every 4 KiB puts, by arithmetic on
# events of 150-400 bytes (10-27 per flush), 90-96 % behind, two pieces 97 %, a whole answer all
# but one (tests/test_attached_integrity.py refuses each): above this share the stream is buffered.
COALESCED_SHARE_MAX = 0.75
# A stream held back whole and then let go over reads paced just apart (each one waited, so each is
# a delivery of its own): its first token waited for all of them, so TTFT is most of the end-to-end
# time and every token arrived within a sliver of it. A plain answer looks so only behind a long
# prefill, and then its decode is slower per token than the prefill was (the prompt goes through in
# parallel batches). The prefill rate TTFT gives also holds a first shot's cold start, so decode must
# be far faster than it: 10x, where a real first shot here was 1.4x (64 prompt tokens, 8 output on
# the CPU) and a buffered stream hundreds of times; and enough tokens that a span is a decode's.
BURST_TTFT_SHARE = 0.9
BURST_SPAN_SHARE = 0.1
BURST_DECODE_OVER_PREFILL = 10
BURST_MIN_TOKENS = 16


def check_arrived_over_time(
    events: list[tuple[float, int]],
    deliveries: list[int] | None,
    accepted_drafts: float | None = 0,
    t_request_s: float | None = None,
    t_end_s: float | None = None,
    prompt_tokens: int | None = None,
) -> None:
    """Refuse (StreamNotTimed, one line) a stream whose tokens did not arrive as the engine made them
    (deliveries: the delivery of each token event, engine.sse): all of them in one delivery, more
    than COALESCED_SHARE_MAX of them behind earlier token events of their delivery beyond the
    accepted drafts that explain it (None: the engine does not say how many it accepted, so this is
    not judged), or a burst (BURST_*: TTFT most of the end-to-end time, the tokens in a sliver of
    it, decode far faster than prefill). A proxy that buffers (an API gateway's or serverless front
    end's default) hands the stream over at once or in pieces, and TTFT would be the end-to-end
    time, decode speed the client's parsing speed. deliveries None: the engine's stream does not say
    (nothing is refused)."""
    if deliveries is None or not events:
        return
    tokens, count = sum(n for _t, n in events), len(set(deliveries))
    if count == 1 and len(events) >= 2:
        _refuse(f"all {len(events)} token events ({tokens} tokens) came in one delivery, each read finding "
                "them already there")  # fmt: skip
    if accepted_drafts is not None:
        behind = tokens_behind(events, deliveries)
        if behind - accepted_drafts > COALESCED_SHARE_MAX * tokens:
            _refuse(f"{behind} of {tokens} tokens came in reads behind earlier tokens ({count} deliveries; "
                    f"drafting explains {accepted_drafts:g}), more than {COALESCED_SHARE_MAX:.0%} beyond "
                    "it")  # fmt: skip
    if t_request_s is not None and t_end_s is not None and len(events) >= 2:
        _check_burst(events, t_request_s, t_end_s, prompt_tokens)


def tokens_behind(events: list[tuple[float, int]], deliveries: list[int]) -> int:
    """The tokens of the events that came in a delivery after an earlier token event of it."""
    seen: set[int] = set()
    behind = 0
    for (_t, n), delivery in zip(events, deliveries, strict=True):
        behind += n if delivery in seen else 0
        seen.add(delivery)
    return behind


def _check_burst(
    events: list[tuple[float, int]], t_request_s: float, t_end_s: float, prompt: int | None
) -> None:
    e2e_s = t_end_s - t_request_s
    ttft_s, span_s = events[0][0] - t_request_s, events[-1][0] - events[0][0]
    if e2e_s <= 0 or ttft_s < BURST_TTFT_SHARE * e2e_s or span_s > BURST_SPAN_SHARE * e2e_s:
        return
    decode_tokens = sum(n for t, n in events if t > events[0][0])
    if decode_tokens < BURST_MIN_TOKENS or not prompt or ttft_s <= 0 or span_s <= 0:
        return
    if decode_tokens / span_s <= BURST_DECODE_OVER_PREFILL * prompt / ttft_s:
        return
    _refuse(
        f"TTFT was {ttft_s / e2e_s:.0%} of the end-to-end time and the {decode_tokens} tokens after the "
        f"first arrived within {span_s / e2e_s:.1%} of it, over {BURST_DECODE_OVER_PREFILL}x faster than "
        "the prompt was prefilled"
    )


def _refuse(what: str) -> None:
    raise StreamNotTimed(
        f"{what}: something between the server and whichshot buffered the stream (a proxy, API gateway or "
        "serverless front end: turn its buffering off), so no time of this shot is the engine's"
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
