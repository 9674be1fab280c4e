"""One immutable shot record: identity, client timings, engine timings, quality, status."""

from dataclasses import asdict
from typing import Any

from whichshot.engine.base import ShotOutcome
from whichshot.hashing import sha256_text
from whichshot.measure.timing import client_timings, token_arrival_times
from whichshot.tables import record_schema

SCHEMA_VERSION: int = record_schema("shots")["x-schema-version"]


def client_fields(outcome: ShotOutcome, prompt_tokens: int) -> dict[str, Any]:
    """Timings from our own clock (measured) and the tok/s derived from them; prefill speed over the
    prompt the engine prefilled (prefill_tokens: the ids sent, or the engine's own count where it
    built the prompt itself, a chat template's tokens included; None where it did and said nothing)."""
    arrivals = token_arrival_times(outcome.token_events)
    prefill_tokens = outcome.prompt_tokens_engine if outcome.prompt_built_by_engine else prompt_tokens
    timings = client_timings(outcome.t_request_s, arrivals, outcome.t_end_s, prefill_tokens or 0)
    fields = asdict(timings)
    fields["prefill_tokens"] = prefill_tokens
    if prefill_tokens is None:
        fields["prefill_tok_s"] = None  # not measured: how long the prompt was is not known
    fields["first_token_mono_s"] = arrivals[0] if arrivals else None
    fields["last_token_mono_s"] = arrivals[-1] if arrivals else None
    fields["stream_token_events"] = len(outcome.token_events)
    fields["stream_token_deliveries"] = outcome.token_deliveries
    fields["token_arrival_s"] = [t - outcome.t_request_s for t in arrivals]
    return fields


STREAM_COLUMNS = (
    "streams_in_flight", "streams_output_tokens", "streams_prompt_tokens", "stream_decode_tok_s_mean",
    "stream_decode_tok_s_min", "stream_ttft_max_s",
    "aggregate_decode_tok_s", "aggregate_output_tok_s", "streams_same_output",
)  # fmt: skip


def stream_fields(outcomes: list[ShotOutcome], prompt_tokens: int) -> dict[str, Any]:
    """What N requests in flight at once did together (measured on our clock): each stream's decode
    speed (mean, slowest), the longest TTFT, and the aggregate decode speed, every stream's tokens
    after its first over the span from the earliest first token to the latest last one."""
    timings = [client_fields(outcome, prompt_tokens) for outcome in outcomes]
    decode = [t["decode_tok_s"] for t in timings if t["decode_tok_s"] is not None]
    firsts = [t["first_token_mono_s"] for t in timings if t["first_token_mono_s"] is not None]
    lasts = [t["last_token_mono_s"] for t in timings if t["last_token_mono_s"] is not None]
    span_s = max(lasts) - min(firsts) if firsts and lasts else 0.0
    after_first = sum(t["decode_tokens"] for t in timings)
    wall_s = max(o.t_end_s for o in outcomes) - min(o.t_request_s for o in outcomes)
    ttfts = [t["ttft_s"] for t in timings if t["ttft_s"] is not None]
    return {
        "streams_in_flight": len(outcomes),
        "streams_output_tokens": sum(t["output_tokens"] for t in timings),
        "streams_prompt_tokens": prompt_tokens * len(outcomes),
        "stream_decode_tok_s_mean": sum(decode) / len(decode) if decode else None,
        "stream_decode_tok_s_min": min(decode) if decode else None,
        "stream_ttft_max_s": max(ttfts) if ttfts else None,
        "aggregate_decode_tok_s": after_first / span_s if span_s > 0 else None,
        "aggregate_output_tok_s": sum(t["output_tokens"] for t in timings) / wall_s if wall_s > 0 else None,
        "streams_same_output": len({tuple(o.output_token_ids) for o in outcomes}) == 1,
    }


def engine_fields(outcome: ShotOutcome) -> dict[str, Any]:
    """What the engine reported about the shot, under engine_* names."""
    timings = outcome.engine_timings
    return {
        "engine_prompt_tokens": outcome.prompt_tokens_engine,
        "engine_prompt_ms": timings.get("prompt_ms"),
        "engine_prefill_tok_s": timings.get("prompt_per_second"),
        "engine_output_tokens": timings.get("predicted_n"),
        "engine_decode_ms": timings.get("predicted_ms"),
        "engine_decode_tok_s": timings.get("predicted_per_second"),
        "engine_cached_tokens": timings.get("cache_n"),
        "engine_draft_tokens": timings.get("draft_n"),
        "engine_draft_accepted": timings.get("draft_n_accepted"),
        "engine_draft_mean_len": timings.get("draft_mean_len"),
        "engine_ttft_s": timings.get("ttft_s"),
        "engine_itl_mean_s": timings.get("itl_mean_s"),
        "engine_steps": timings.get("engine_steps"),
        "stop_reason": outcome.stop_reason,
        "engine_model_id": outcome.served_model,
        **server_counter_fields(outcome.server_counters),
    }


SERVER_COUNTER_COLUMNS = {
    "server_spec_draft_tokens_delta": "draft_tokens",
    "server_spec_accepted_tokens_delta": "accepted_tokens",
    "server_spec_drafts_delta": "drafts",
    "server_spec_accepted_per_pos_delta": "accepted_per_pos",
    "server_metrics_source": "source",
}


def server_counter_fields(counters: dict[str, Any]) -> dict[str, Any]:
    """Deltas of the server's process-wide /metrics counters over the shot (None = not read)."""
    return {column: counters.get(key) for column, key in SERVER_COUNTER_COLUMNS.items()}


def output_fields(outcome: ShotOutcome) -> dict[str, Any]:
    """The output itself (untrusted text), its fingerprint, and where its ids came from."""
    return {
        "output_token_ids": outcome.output_token_ids,
        "output_text": outcome.output_text,
        "output_sha256": sha256_text(",".join(map(str, outcome.output_token_ids))),
        "output_tokens_streamed": outcome.output_tokens_streamed,
        "output_ids_source": outcome.output_ids_source,
        "extra_requests": outcome.extra_requests,
    }


def empty_result_fields() -> dict[str, Any]:
    """The result columns of a shot that produced nothing (failed)."""
    keys = [
        "ttft_s", "prefill_tok_s", "decode_tok_s", "e2e_s", "output_tokens", "decode_span_s", "decode_tokens",
        "first_token_mono_s", "last_token_mono_s", "engine_prompt_tokens", "engine_prompt_ms",
        "engine_prefill_tok_s", "engine_output_tokens", "engine_decode_ms", "engine_decode_tok_s",
        "engine_cached_tokens", "engine_draft_tokens", "engine_draft_accepted", "engine_draft_mean_len",
        "engine_ttft_s", "engine_itl_mean_s", "engine_steps", "stream_token_events",
        "stream_token_deliveries", "stop_reason", "prefill_tokens", "engine_model_id",
        "output_text", "output_sha256", "output_tokens_streamed", "output_ids_source", "extra_requests",
    ]  # fmt: skip
    fields: dict[str, Any] = dict.fromkeys([*keys, *SERVER_COUNTER_COLUMNS, *STREAM_COLUMNS])
    fields["output_token_ids"] = []
    fields["token_arrival_s"] = []
    return fields
