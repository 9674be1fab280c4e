"""Prompts cut to an exact number of tokens with the engine's own tokenizer."""

from typing import Any

from whichshot.engine.base import RunningEngine
from whichshot.errors import WhichshotError
from whichshot.hashing import sha256_text


def cut_prompts(
    engine: RunningEngine, corpus: dict[str, str], lengths: list[int], bos_token_id: int | None
) -> dict[str, Any]:
    """For each length N, variants A (corpus start) and B (corpus middle): exactly N token ids."""
    corpus_ids = engine.tokenize(corpus["text"])
    prefix = [bos_token_id] if bos_token_id is not None else []
    offsets = {"A": 0, "B": len(corpus_ids) // 2}
    prompts = {}
    for length in lengths:
        for variant, offset in offsets.items():
            body = corpus_ids[offset : offset + length - len(prefix)]
            if len(body) + len(prefix) < length:
                raise WhichshotError(
                    f"corpus {corpus['name']} has only {len(corpus_ids)} tokens; "
                    f"cannot cut a {length}-token prompt at offset {offset}"
                )
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
