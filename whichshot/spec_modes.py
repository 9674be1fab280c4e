"""Speculative modes per engine kind: which settings a mode gives each kind, and where it applies.

A mode is `{}` (no drafting: every engine runs it) or carries one block per engine kind it applies
to, e.g. `{llama_cpp: {type: ngram-simple}, transformers: {prompt_lookup_num_tokens: 10}}`; a kind
may accept an older form with its keys at the mode's top (its legacy_mode_keys). A mode without
settings for an engine's kind is skipped for that engine, never run as no drafting.
"""

from typing import Any

from whichshot.engine import engine_kinds, load_engine


def _legacy_keys() -> set[str]:
    return {key for kind in engine_kinds() for key in load_engine(kind).legacy_mode_keys}


def is_no_draft(mode: dict[str, Any]) -> bool:
    """True for the mode that drafts nothing (it has no settings for any kind)."""
    return not any(key in mode for key in (*engine_kinds(), *_legacy_keys(), "draft_model"))


def kind_settings(mode: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The mode's settings for an engine kind: {} for no drafting, None where it does not apply."""
    if is_no_draft(mode):
        return {}
    if kind in mode:
        return mode[kind]
    legacy = {key: mode[key] for key in load_engine(kind).legacy_mode_keys if key in mode}
    return legacy or None


def applies(mode: dict[str, Any], kind: str) -> bool:
    """Whether an engine of this kind runs the mode."""
    return kind_settings(mode, kind) is not None


def uses_draft_model(settings: dict[str, Any], kind: str) -> bool:
    """Whether these kind settings draft with the mode's draft model."""
    return load_engine(kind).uses_draft_model(settings)
