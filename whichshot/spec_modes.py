"""Speculative modes per engine kind: which settings a mode gives each kind, and where it applies.

A mode is `{}` (no drafting: every engine runs it) or carries one block per engine kind it
applies to, e.g. `{llama_cpp: {type: ngram-simple}, transformers: {prompt_lookup_num_tokens: 10}}`.
The older form with `type`/`options` at the top is llama.cpp's block. A mode without a block for
an engine's kind is skipped for that engine, never run as no drafting.
"""

from typing import Any

KIND_BLOCKS = ("llama_cpp", "transformers", "openai")
_LEGACY_LLAMA_KEYS = ("type", "options")


def is_no_draft(mode: dict[str, Any]) -> bool:
    """True for the mode that drafts nothing (it has no settings for any kind)."""
    return not any(key in mode for key in (*KIND_BLOCKS, *_LEGACY_LLAMA_KEYS, "draft_model"))


def kind_settings(mode: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The mode's settings for an engine kind: {} for no drafting, None where it does not apply."""
    if is_no_draft(mode):
        return {}
    if kind in mode:
        return mode[kind]
    if kind == "llama_cpp" and "type" in mode:
        return {key: mode[key] for key in _LEGACY_LLAMA_KEYS if key in mode}
    return None


def applies(mode: dict[str, Any], kind: str) -> bool:
    """Whether an engine of this kind runs the mode."""
    return kind_settings(mode, kind) is not None


def uses_draft_model(settings: dict[str, Any], kind: str) -> bool:
    """Whether these kind settings draft with the mode's draft model."""
    if kind == "llama_cpp":
        return settings.get("type") == "draft-simple"
    if kind == "transformers":
        return bool(settings.get("assistant_model"))
    return any("{draft_model}" in arg for arg in settings.get("args", []))
