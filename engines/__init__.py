"""Inference engines, one module each; `load_engine(kind)` finds the module by name."""

import importlib

from engines.base import Engine

ENGINE_KINDS = ("llama_cpp",)


def load_engine(kind: str) -> Engine:
    """The engine object of module `engines.<kind>`."""
    if kind not in ENGINE_KINDS:
        raise ValueError(f"unknown engine kind {kind!r}; known: {', '.join(ENGINE_KINDS)}")
    return importlib.import_module(f"engines.{kind}").ENGINE
