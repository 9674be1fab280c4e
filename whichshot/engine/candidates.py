"""The question the divergence probe (measure/divergence_probe.py) puts to every engine kind that
reports its top candidates (`reports_top_candidates`), and the shape of the answer.

The question: the target's n most likely tokens at the position after a prompt and a prefix, two ways.
One-token: the prompt alone is sent and the prefix decoded greedily one token at a time, then one token
more, as an undrafted request makes it. Batched: the prefix is sent with the prompt and evaluated in one
batch with it, then one token, as a verification evaluates the tokens it checks. Either way the
candidates are those of the last position generated, read from the raw logits (no sampler applies).

The answer, the same from every kind: {"top": {token id: log-probability}, "decoded": the tokens
generated before that position} (the one-token path's replay of the prefix, [] for the batched one).
A kind's running engine gives it as
    def top_candidates(self, prompt_token_ids, prefix_ids, batched, n, timeout_s) -> dict
"""

from typing import Any

from whichshot.engine.sse import MalformedStream


def probe_request(prompt_ids: list[int], prefix_ids: list[int], batched: bool) -> tuple[list[int], int]:
    """(the prompt to send, the tokens to generate greedily) of one path."""
    if batched:
        return prompt_ids + prefix_ids, 1
    return list(prompt_ids), len(prefix_ids) + 1


def candidates_answer(top: dict[int, float], generated: list[int], engine: str) -> dict[str, Any]:
    """The answer from the last position's candidates and every token generated (the last one
    included); refused where the engine gave no candidates."""
    if not top:
        raise MalformedStream(f"{engine} returned no top candidates at the last position")
    return {"top": top, "decoded": [int(token) for token in generated[:-1]]}
