"""Prompts cut to an exact number of tokens with the engine's own tokenizer."""

from typing import Any

from whichshot.engine.base import RunningEngine
from whichshot.errors import WhichshotError
from whichshot.hashing import sha256_text


def corpus_tokens_needed(length: int, bos: bool = True) -> int:
    """The fewest corpus tokens that hold a length-token prompt at the start and one at the middle
    (a BOS token, where the model has one, is not cut from the corpus)."""
    return 2 * (length - int(bos)) - 1


def cut_prompts(
    engine: RunningEngine, corpus: dict[str, str], lengths: list[int], bos_token_id: int | None
) -> dict[str, Any]:
    """For each length N, variants A (corpus start) and B (corpus middle): exactly N token ids."""
    corpus_ids = engine.tokenize(corpus["text"])
    needed = corpus_tokens_needed(max(lengths), bos_token_id is not None)
    if len(corpus_ids) < needed:
        raise WhichshotError(
            f"prompts.corpus: {corpus.get('path', corpus['name'])} is {len(corpus_ids)} tokens in this "
            f"model's tokenizer; the {max(lengths)}-token prompts are cut at its start and its middle and "
            f"need at least {needed}: give more text or shorter prompts.lengths"
        )
    prefix = [bos_token_id] if bos_token_id is not None else []
    offsets = {"A": 0, "B": len(corpus_ids) // 2}
    prompts = {}
    for length in lengths:
        for variant, offset in offsets.items():
            body = corpus_ids[offset : offset + length - len(prefix)]
            text = engine.detokenize(body)
            prompts[f"{length}{variant}"] = {
                "prompt_tokens": length,
                "variant": variant,
                "corpus_token_offset": offset,
                "token_ids": prefix + body,
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
