"""The engine boundary: what the pipeline knows of an inference engine. An engine kind is one module
(the built-in ones in the top-level engines/ folder) whose ENGINE object carries everything of the
kind: its config keys (config_schema) and checks, its speculative-mode settings (mode_schema,
check_mode, uses_draft_model), its warm-ups, its caveats, build, start and shots (base.py names
them). The streaming client, process handling and /metrics parsing it may use live here beside the
protocol. A kind is known once registered; the built-in kinds register here, by module name only:
nothing in whichshot imports a kind."""

import importlib

from whichshot.engine.base import Engine

_REGISTRY: dict[str, Engine] = {}
# Built-in kind -> module (transformers' may not be named transformers: it would shadow the library).
_BUILT_IN = {"llama_cpp": "llama_cpp", "transformers": "transformers_engine", "openai": "openai_compat",
             "vllm": "vllm"}  # fmt: skip


def register(engine: Engine) -> Engine:
    """Make an engine kind known to the config check, the grid and every stage."""
    _REGISTRY[engine.kind] = engine
    return engine


def import_engine_modules(modules: list[str]) -> None:
    """Import engine modules named in config (engine_modules): each registers its kind."""
    for module in modules:
        importlib.import_module(module)


def engine_kinds() -> tuple[str, ...]:
    """Every known kind, built-in ones first."""
    _load_built_in()
    return tuple(_REGISTRY)


def load_engine(kind: str) -> Engine:
    """The engine object of a kind."""
    _load_built_in()
    if kind not in _REGISTRY:
        raise ValueError(f"unknown engine kind {kind!r}; known: {', '.join(_REGISTRY)}")
    return _REGISTRY[kind]


def _load_built_in() -> None:
    for kind, module in _BUILT_IN.items():
        if kind not in _REGISTRY:
            register(importlib.import_module(f"engines.{module}").ENGINE)
