"""Checks of engines and speculative modes the schema cannot express, one readable line each."""

from typing import Any

from whichshot.errors import WhichshotError
from whichshot.spec_modes import KIND_BLOCKS, applies, is_no_draft, kind_settings, uses_draft_model

LOOPBACK_NAMES = ("127.0.0.1", "{host}")


def _fail(where: str, problem: str) -> None:
    raise WhichshotError(f"invalid config: {where}: {problem}")


def check_engines(config: dict[str, Any]) -> None:
    """An openai engine's server must be told to bind 127.0.0.1 (in argv or env)."""
    for name, spec in config["engines"].items():
        if spec["kind"] != "openai":
            continue
        words = [*spec["argv"], *spec["env"].values()]
        if not any(loop in word for word in words for loop in LOOPBACK_NAMES):
            _fail(
                f"engines.{name}.argv",
                "the server must bind 127.0.0.1: name {host} or 127.0.0.1 in argv or env",
            )


def check_warmups(config: dict[str, Any]) -> None:
    """Every engine can honour every protocol.engine_warmup value (an openai server only its own)."""
    from engines import load_engine  # here: the engine modules import the measurement layer

    for name, spec in config["engines"].items():
        offered = load_engine(spec["kind"]).warmups
        for value in config["protocol"]["engine_warmup"]:
            if value not in offered:
                _fail(
                    "protocol.engine_warmup",
                    f"engine {name} ({spec['kind']}) cannot promise warm-up {value!r}; it offers "
                    + ", ".join(offered),
                )


def check_spec_modes(config: dict[str, Any]) -> None:
    """Each mode: a known draft model used by exactly the settings that draft, and some engine runs it."""
    kinds = {spec["kind"] for spec in config["engines"].values()}
    for name, mode in config["spec_modes"].items():
        where = f"spec_modes.{name}"
        draft = mode.get("draft_model")
        if draft is not None and draft not in config["models"]:
            _fail(f"{where}.draft_model", f"{draft!r} is not in models")
        if "type" in mode and "llama_cpp" in mode:
            _fail(
                where,
                "give llama.cpp's settings either at the top (type/options) or under llama_cpp, not both",
            )
        if "transformers" in mode:
            _check_transformers_mode(f"{where}.transformers", mode["transformers"])
        _check_draft_use(where, mode, draft is not None)
        if not is_no_draft(mode) and not any(applies(mode, kind) for kind in kinds):
            _fail(where, f"has settings for no engine kind of this config ({', '.join(sorted(kinds))})")


def _check_transformers_mode(where: str, settings: dict[str, Any]) -> None:
    lookup, assistant = "prompt_lookup_num_tokens" in settings, bool(settings.get("assistant_model"))
    if lookup == assistant:
        _fail(where, "give exactly one of prompt_lookup_num_tokens or assistant_model: true")
    if "max_matching_ngram_size" in settings and not lookup:
        _fail(where, "max_matching_ngram_size belongs to prompt lookup")
    if "num_assistant_tokens" in settings and not assistant:
        _fail(where, "num_assistant_tokens belongs to assistant_model")


def _check_draft_use(where: str, mode: dict[str, Any], has_draft: bool) -> None:
    users = [kind for kind in KIND_BLOCKS if uses_draft_model(kind_settings(mode, kind) or {}, kind)]
    if users and not has_draft:
        _fail(where, f"its {users[0]} settings draft with a model: give draft_model")
    if has_draft and not users:
        _fail(
            where,
            "draft_model is given but no setting drafts with it (llama_cpp type draft-simple, "
            "transformers assistant_model: true, openai {draft_model} in args)",
        )
