"""Inference engines, one module each; `load_engine(kind)` finds the module by name."""

import importlib

from engines.base import Engine

# kind -> module (transformers' module may not be named transformers: it would shadow the library)
MODULES = {"llama_cpp": "llama_cpp", "transformers": "transformers_engine", "openai": "openai_compat"}
ENGINE_KINDS = tuple(MODULES)
# Kinds with a benchmark tool of their own (llama-bench) for the cross-check.
BENCH_KINDS = ("llama_cpp",)


def load_engine(kind: str) -> Engine:
    """The engine object of the kind's module."""
    if kind not in MODULES:
        raise ValueError(f"unknown engine kind {kind!r}; known: {', '.join(ENGINE_KINDS)}")
    return importlib.import_module(f"engines.{MODULES[kind]}").ENGINE
