"""Prompts cut to an exact number of tokens with the engine's own tokenizer."""

from typing import Any

from engines.base import RunningEngine
from whichshot.errors import WhichshotError
from whichshot.hashing import sha256_text


def cut_prompts(
    engine: RunningEngine, corpus: dict[str, str], lengths: list[int], bos_token_id: int | None
) -> dict[str, Any]:
    """For each length N: N token ids (BOS first when the model wants one) from the corpus start."""
    corpus_ids = engine.tokenize(corpus["text"])
    prefix = [bos_token_id] if bos_token_id is not None else []
    prompts = {}
    for length in lengths:
        body = corpus_ids[: length - len(prefix)]
        if len(body) + len(prefix) < length:
            raise WhichshotError(
                f"corpus {corpus['name']} has only {len(corpus_ids)} tokens; "
                f"cannot cut a {length}-token prompt"
            )
        token_ids = prefix + body
        text = engine.detokenize(body)
        prompts[str(length)] = {
            "prompt_tokens": length,
            "token_ids": token_ids,
            "text": text,
            "text_sha256": sha256_text(text),
        }
    return {
        "corpus": corpus["name"],
        "corpus_sha256": corpus["sha256"],
        "python_version": corpus["python_version"],
        "corpus_tokens": len(corpus_ids),
        "text_kind": "real",
        "bos_token_id": bos_token_id,
        "prompts": prompts,
    }
