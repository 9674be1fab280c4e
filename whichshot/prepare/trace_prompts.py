"""A trace's requests as exact token sequences, with the model's chat template applied where the
request is chat messages and the model has one. A request whose prompt and output do not fit the
trace's context is marked skipped here (with the numbers), never cut."""

from typing import Any

from whichshot.engine.base import RunningEngine
from whichshot.prepare.traces import Trace, TraceRequest, load_trace
from whichshot.prepare.workload_prompts import tokenized_prompt
from whichshot.shots.axes import TRACE_WORKLOAD
from whichshot.shots.quality import self_repetition
from whichshot.shots.quality_fields import COPY_SPAN_TOKENS


def build_trace_prompts(
    engine: RunningEngine,
    traces: dict[str, dict[str, Any]],
    has_chat_template: bool,
    bos_token_id: int | None,
) -> dict[str, Any]:
    """Every configured trace this model runs: its pin and each request's prompt (or why skipped)."""
    built = {}
    for name, spec in traces.items():
        trace = load_trace(name, spec)
        requests = {
            request.request_id: _request_prompt(engine, trace, spec, request, has_chat_template, bos_token_id)
            for request in trace.requests
        }
        built[name] = {"path": trace.path, "sha256": trace.sha256, "format": trace.format,
                       "output_length": spec["output_length"], "requests": requests}  # fmt: skip
    return built


def _request_prompt(
    engine: RunningEngine,
    trace: Trace,
    spec: dict[str, Any],
    request: TraceRequest,
    has_chat_template: bool,
    bos_token_id: int | None,
) -> dict[str, Any]:
    text, ids, style = _tokens(engine, request, has_chat_template, bos_token_id)
    output_tokens = request.max_tokens or spec["max_output_tokens"]
    need, context = len(ids) + output_tokens, spec["context_tokens"]
    skipped = (
        f"prompt of {len(ids)} tokens + {output_tokens} output tokens = {need} > context_tokens {context}"
        if need > context
        else None
    )
    return {
        "workload": TRACE_WORKLOAD,
        "text_kind": request.text_kind,
        "prompt_style": style,
        "token_ids": ids,
        "prompt_tokens": len(ids),
        "self_repetition": self_repetition(ids, COPY_SPAN_TOKENS),
        "text": text,
        "checks": {},
        "max_output_tokens": output_tokens,
        "output_length": spec["output_length"],
        "skipped": skipped,
        "source": {
            "corpus": "trace",
            "trace": trace.name,
            "path": trace.path,
            "sha256": trace.sha256,
            "format": trace.format,
            "label": request.label,
        },  # fmt: skip
    }


def _tokens(
    engine: RunningEngine, request: TraceRequest, has_chat_template: bool, bos_token_id: int | None
) -> tuple[str, list[int], str]:
    """(prompt text, its token ids, how it was formed)."""
    if request.prompt is not None:
        bos = [bos_token_id] if bos_token_id is not None else []
        return request.prompt, bos + engine.tokenize(request.prompt), "plain completion prompt (the trace's)"
    # A model without a chat template gets the conversation as plain text, ending where it answers.
    plain = "".join(f"{m['role']}: {m['content']}\n\n" for m in request.messages) + "assistant:"
    return tokenized_prompt(engine, list(request.messages), plain, has_chat_template, bos_token_id)
