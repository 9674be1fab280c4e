"""Every user text of a config, read and checked when the workflow loads, before anything is measured:
its pin, that it is non-empty UTF-8 text (user_texts), and what each use of it needs that is known
without the model's tokenizer. One line names the config key, the file and the cause.

The model's tokenizer runs only when the prompts are built (it needs the engine), so a length is
checked here against a bound that holds for every tokenizer: a token covers at least one byte of
UTF-8 (byte-level BPE, and SentencePiece with byte fallback), plus one for a leading-space marker.
A text refused here is too short for any model; one that passes may still be too short in the
model's tokens, which the prompt builder then says with the exact count."""

from typing import Any

from whichshot.errors import WhichshotError
from whichshot.prepare.prompts import corpus_tokens_needed
from whichshot.prepare.user_texts import UserTexts, load_user_texts
from whichshot.prepare.workload_prompts import (
    NEEDLE_MIN_SECTIONS,
    load_edit_source,
    longest_document,
    min_document_tokens,
    workload_keys,
)

# The document workloads that cut their document from workloads.texts.
TEXT_WORKLOADS = ("needle", "verbatim_recall")


def most_tokens(text: str) -> int:
    """More tokens than any tokenizer makes of this text: one per UTF-8 byte and a leading marker."""
    return len(text.encode("utf-8")) + 1


def check_user_inputs(config: dict[str, Any]) -> None:
    """Read every user text the config names and refuse one that its use cannot be built from."""
    corpus = config["prompts"]["corpus"]
    if isinstance(corpus, dict):
        _check_corpus(load_user_texts(corpus, "prompts.corpus"), max(config["prompts"]["lengths"]))
    workloads = config["workloads"]
    keys = workload_keys(workloads["names"], workloads["text_kinds"])
    asked = [name for name, kind in keys if kind == "real"]
    if workloads.get("texts"):
        texts = load_user_texts(workloads["texts"], "workloads.texts")
        for name in (name for name in TEXT_WORKLOADS if name in asked):
            _check_document_text(texts, name, workloads)
    if workloads.get("edit_source"):
        load_edit_source(workloads["edit_source"])


def _check_corpus(texts: UserTexts, longest_prompt: int) -> None:
    needed = corpus_tokens_needed(longest_prompt)
    text = texts.joined()  # what the prompt builder tokenizes
    if most_tokens(text) < needed:
        raise WhichshotError(
            f"prompts.corpus: {texts.path} is {_bytes(text)}, fewer than {needed} tokens in any tokenizer; "
            f"the {longest_prompt}-token prompts are cut at its start and its middle and need at least "
            f"{needed}: give more text or shorter prompts.lengths"
        )


def _check_document_text(texts: UserTexts, workload: str, workloads: dict[str, Any]) -> None:
    sections = texts.sections()
    if workload == "needle" and len(sections) < NEEDLE_MIN_SECTIONS:
        raise WhichshotError(
            f"workloads.texts: {texts.path} has {len(sections)} paragraph(s); the needle plants its "
            f"passphrase between whole paragraphs and needs at least {NEEDLE_MIN_SECTIONS} (paragraphs end "
            "at blank lines, or at every line of a file with no blank line)"
        )
    document_tokens = workloads["document_tokens"]
    needed = min_document_tokens(workload, document_tokens)
    longest = longest_document(workload, sections, workloads["seed"])
    if most_tokens(longest) < needed:
        raise WhichshotError(
            f"workloads.texts: {texts.path}: the longest {workload} document it makes is {_bytes(longest)}, "
            f"fewer than {needed} tokens in any tokenizer; document_tokens={document_tokens} needs at least "
            f"{needed}: give more text or lower document_tokens"
        )


def _bytes(text: str) -> str:
    return f"{len(text.encode('utf-8'))} bytes of UTF-8"
