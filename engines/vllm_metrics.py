"""What vLLM's /metrics says of one shot: deltas of its process-wide counters and histograms between a
read before the request and one after it, and the check that they count exactly this request.

One process serves one speculative mode and only our requests, so the deltas are this shot's: its
drafts, draft tokens, accepted tokens and acceptance per draft position; its own time to first token,
inter-token intervals (one per engine step that emitted tokens), prefill and decode time; its prompt
and generated token counts, which must equal the stream's usage, else the shot is refused.
"""

from typing import Any

from whichshot.engine.prom_metrics import counter_deltas
from whichshot.engine.stream import TokenCountMismatch

SPLIT_BY = ("position",)
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
REQUESTS = "vllm:request_success_total"
# logical name -> vLLM's metric (first found); histograms by their _sum and _count samples.
COUNTERS = {
    "requests": (REQUESTS,),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}
HISTOGRAMS = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
}


def request_counted(before: dict[str, float], after: dict[str, float]) -> bool:
    """Whether the after-read counts one more finished request (vLLM records a request's statistics a
    moment after its last chunk leaves)."""
    return after.get(REQUESTS, 0.0) - before.get(REQUESTS, 0.0) >= 1


def shot_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """counter_deltas' speculative counters plus vLLM's own: request counts, histogram sums and counts,
    accepted tokens per draft position (a list, position 0 first; None without drafting)."""
    deltas: dict[str, Any] = counter_deltas(before, after)
    for logical, names in COUNTERS.items():
        deltas[logical] = _delta(before, after, names)
    for logical, names in HISTOGRAMS.items():
        deltas[f"{logical}_sum_s"] = _delta(before, after, tuple(f"{n}_sum" for n in names))
        deltas[f"{logical}_count"] = _delta(before, after, tuple(f"{n}_count" for n in names))
    deltas["accepted_per_pos"] = _per_position(before, after)
    return deltas


def reconcile_counters(deltas: dict[str, Any], streamed_tokens: int, prompt_tokens: int | None) -> None:
    """The server counted exactly this request: one request, as many generated tokens as the stream
    carried, as many prompt tokens as usage said; otherwise the shot is refused."""
    expected = {"requests": 1, "generation_tokens": streamed_tokens, "prompt_tokens": prompt_tokens}
    for logical, want in expected.items():
        got = deltas.get(logical)
        if want is not None and (got is None or round(got) != want):
            counted = "none" if got is None else f"{got:g}"
            raise TokenCountMismatch(
                f"vLLM's /metrics counted {counted} {logical.replace('_', ' ')} over the shot, the stream "
                f"{want}: the shot is not the one the server served (another request, or a stream of the "
                "wrong length)"
            )


def engine_timings(deltas: dict[str, Any], output_tokens: int, prompt_tokens: int | None) -> dict[str, Any]:
    """The shot's engine-reported figures, under the names llama-server's timings use where they mean
    the same: prefill and decode time and speed, drafts; and vLLM's own TTFT and mean interval."""
    timings: dict[str, Any] = {}
    prefill_s, decode_s = deltas.get("prefill_sum_s"), deltas.get("decode_sum_s")
    if prefill_s:
        timings["prompt_ms"] = prefill_s * 1000
        timings["prompt_per_second"] = prompt_tokens / prefill_s if prompt_tokens else None
    if decode_s:
        timings["predicted_ms"] = decode_s * 1000
        timings["predicted_per_second"] = (output_tokens - 1) / decode_s
    if deltas.get("ttft_count") == 1:
        timings["ttft_s"] = deltas["ttft_sum_s"]
    if deltas.get("itl_count"):
        timings["itl_mean_s"] = deltas["itl_sum_s"] / deltas["itl_count"]
        timings["engine_steps"] = round(deltas["itl_count"])
    drafts = deltas.get("drafts")
    if drafts is not None and deltas.get("draft_tokens") is not None:
        timings["draft_n"] = round(deltas["draft_tokens"])
        timings["draft_n_accepted"] = round(deltas["accepted_tokens"] or 0)
        # vLLM's "mean acceptance length": tokens emitted per step that verified a draft.
        timings["draft_mean_len"] = 1 + timings["draft_n_accepted"] / drafts if drafts else None
    return timings


def _delta(before: dict[str, float], after: dict[str, float], names: tuple[str, ...]) -> float | None:
    name = next((n for n in names if n in before and n in after), None)
    if name is None:
        return None
    delta = after[name] - before[name]
    return delta if delta >= 0 else None


def _per_position(before: dict[str, float], after: dict[str, float]) -> list[float] | None:
    found = []
    position = 0
    while (key := f'{PER_POSITION}{{position="{position}"}}') in after:
        found.append(after[key] - before.get(key, 0.0))
        position += 1
    return found or None
