"""Checks of engines and speculative modes beyond the schema, one readable line each; each kind's
own checks are its module's (check_config, check_mode)."""

from typing import Any

from whichshot.engine import engine_kinds, load_engine
from whichshot.engine.base import compile_caches
from whichshot.errors import invalid_config
from whichshot.shots.axes import DEFAULT_PREFILL_CHUNK, DEFAULT_WARMUP, ONE_STREAM
from whichshot.spec_modes import applies, is_no_draft, kind_settings, uses_draft_model


def check_engines(config: dict[str, Any]) -> None:
    """Each engine's own checks; an engine whichshot does not start (attached to a running server)
    runs warm series only, so the config must ask for some."""
    for name, spec in config["engines"].items():
        engine = load_engine(spec["kind"])
        engine.check_config(name, spec)
        if not engine.starts_processes(spec) and not _any_warm_series(config):
            raise invalid_config(
                "protocol.warm_shots",
                f"engine {name} attaches to a running server, which runs warm series only: give warm_shots",
            )


def _any_warm_series(config: dict[str, Any]) -> bool:
    """Whether the grid, the workloads or the traces (which take the workloads' length) run warm series."""
    workloads = (config.get("workloads") or {}).get("warm_shots")
    return config["protocol"]["warm_shots"] > 0 or (workloads or 0) > 0


def check_warmups(config: dict[str, Any]) -> None:
    """Every engine can honour every protocol.engine_warmup value (an openai server only its own)."""
    for name, spec in config["engines"].items():
        engine = load_engine(spec["kind"])
        offered = engine.warmups
        for value in config["protocol"]["engine_warmup"]:
            if value != DEFAULT_WARMUP and not engine.starts_processes(spec):
                raise invalid_config(
                    "protocol.engine_warmup",
                    f"engine {name} attaches to a running server, whose warm-up whichshot cannot set: "
                    f"{value!r} is refused, only {DEFAULT_WARMUP}",
                )
            if value not in offered:
                raise invalid_config(
                    "protocol.engine_warmup",
                    f"engine {name} ({spec['kind']}) cannot promise warm-up {value!r}; it offers "
                    + ", ".join(offered),
                )


def check_load_axes(config: dict[str, Any]) -> None:
    """Every engine can set every prefill chunk and stream count the protocol asks for."""
    defaults = {"prefill_chunk_tokens": [DEFAULT_PREFILL_CHUNK], "parallel_streams": [ONE_STREAM]}
    for name, spec in config["engines"].items():
        settable = load_engine(spec["kind"]).load_axes
        for axis, default in defaults.items():
            if axis not in settable and config["protocol"][axis] != default:
                raise invalid_config(
                    f"protocol.{axis}",
                    f"engine {name} ({spec['kind']}) cannot set it; it runs only {default[0]}",
                )
    _check_slot_context(config["protocol"], config["prompts"]["lengths"])


def check_compile_caches(config: dict[str, Any]) -> None:
    """Some engine of the config can start a process with each compile cache asked for."""
    offered = {
        value for spec in config["engines"].values() for value in compile_caches(load_engine(spec["kind"]))
    }
    for value in config["protocol"]["compile_caches"]:
        if value not in offered:
            raise invalid_config(
                "protocol.compile_caches",
                f"no engine of this config has a compile cache to start {value!r} (vllm has; llama_cpp, "
                "transformers and openai run only engine_default)",
            )


def _check_slot_context(protocol: dict[str, Any], lengths: list[int]) -> None:
    """Streams share the context window: each slot must still hold the longest prompt and its output."""
    streams = max(protocol["parallel_streams"])
    slot = min(protocol["context_tokens"]) // streams
    needed = max(lengths, default=0) + protocol["output_tokens"]
    if streams > ONE_STREAM and slot < needed:
        raise invalid_config(
            "protocol.parallel_streams",
            f"{streams} streams leave each {slot} tokens of the smallest context window, less than the "
            f"longest prompt plus output ({needed}): raise context_tokens or lower the streams",
        )


def check_spec_modes(config: dict[str, Any]) -> None:
    """Each mode: a known draft model used by exactly the settings that draft, and some engine runs it."""
    kinds = {spec["kind"] for spec in config["engines"].values()}
    for name, mode in config["spec_modes"].items():
        where = f"spec_modes.{name}"
        draft = mode.get("draft_model")
        if draft is not None and draft not in config["models"]:
            raise invalid_config(f"{where}.draft_model", f"{draft!r} is not in models")
        for kind in engine_kinds():
            engine = load_engine(kind)
            if kind in mode and any(key in mode for key in engine.legacy_mode_keys):
                raise invalid_config(
                    where, f"give {kind}'s settings either at the top or under {kind}, not both"
                )
            if kind in mode:
                engine.check_mode(f"{where}.{kind}", mode[kind])
        _check_draft_use(where, mode, draft is not None)
        _check_attached_modes(config, where, mode)
        if not is_no_draft(mode) and not any(applies(mode, kind) for kind in kinds):
            raise invalid_config(
                where, f"has settings for no engine kind of this config ({', '.join(sorted(kinds))})"
            )


def _check_attached_modes(config: dict[str, Any], where: str, mode: dict[str, Any]) -> None:
    """A mode's server flags cannot reach a server whichshot attaches to (it did not start it)."""
    if is_no_draft(mode):
        return
    for name, spec in config["engines"].items():
        if applies(mode, spec["kind"]) and not load_engine(spec["kind"]).starts_processes(spec):
            raise invalid_config(
                where,
                f"engine {name} attaches to a running server, which whichshot cannot give this mode's "
                "server flags: start the server with them yourself and leave the mode out",
            )


def _check_draft_use(where: str, mode: dict[str, Any], has_draft: bool) -> None:
    users = [kind for kind in engine_kinds() if uses_draft_model(kind_settings(mode, kind) or {}, kind)]
    if users and not has_draft:
        raise invalid_config(where, f"its {users[0]} settings draft with a model: give draft_model")
    if has_draft and not users:
        raise invalid_config(
            where,
            "draft_model is given but no setting drafts with it (llama_cpp type draft-simple, "
            "transformers assistant_model: true, openai {draft_model} in args)",
        )
