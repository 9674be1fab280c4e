"""Prompts for the four workloads (edit_file, verbatim_recall, new_code, explain) and the needle shot.

Each builder returns a plain dict: the chat messages, a plain completion prompt for base models
without a chat template, what to check in the output, and where the text came from. Nothing here
knows about engines or tokenizers; cutting a document to an exact token count is the caller's job.
"""

import ast
import importlib.util
import platform
import random
from pathlib import Path
from typing import Any

from whichshot.hashing import sha256_text
from whichshot.prepare.filler import synthetic_filler

# Workloads whose prompt holds a document of workloads.document_tokens tokens.
DOCUMENT_WORKLOADS = ("verbatim_recall", "needle")
DOCUMENT_OPEN, DOCUMENT_CLOSE = "<document>", "</document>"
SECTION_HEADER = "## {title}"
NEEDLE_TITLE = "Note"
PROMPT_STYLE = {
    "messages": "chat: apply the model's chat template",
    "completion_prompt": "plain completion prompt, no chat template: for base models without one",
}
_PASSPHRASE_COLOURS = ["violet", "amber", "crimson", "teal", "ochre", "silver", "indigo", "olive"]
_PASSPHRASE_NOUNS = ["harbor", "lantern", "meadow", "comet", "quarry", "orchard", "glacier", "falcon"]
_RENAME_SUFFIXES = ["renamed", "v2", "updated", "checked"]
_NEW_CODE_SPECS = [
    "a function merge_intervals(intervals) that merges overlapping closed intervals given as (start, end) "
    "pairs and returns them sorted",
    "a class LRUCache with get(key) and put(key, value) methods and a fixed capacity, evicting the least "
    "recently used entry",
    "a function parse_duration(text) that parses durations such as '1h30m15s' or '45s' into seconds",
    "functions rle_encode(text) and rle_decode(pairs) for run-length encoding of a string",
    "a function topological_sort(graph) for a dict mapping each node to its dependencies, raising "
    "ValueError on a cycle",
]
_EXPLAIN_CONCEPTS = [
    "why looking up a key in a hash table takes constant time on average, and when it does not",
    "how TCP congestion control decides how fast to send",
    "what a closure is in Python and how it captures variables",
    "why floating-point addition is not associative",
    "how reference counting and a cycle collector together reclaim memory in CPython",
]


def _rng(purpose: str, seed: int) -> random.Random:
    """A reproducible generator for one purpose and seed (not for secrets)."""
    return random.Random(f"{purpose}-{seed}")  # noqa: S311


def _workload(
    name: str, text_kind: str, prompt: str, completion_prompt: str, checks: dict, source: dict, seed: int
) -> dict[str, Any]:
    """The common shape of every workload dict."""
    return {
        "workload": name,
        "text_kind": text_kind,
        "seed": seed,
        "messages": [{"role": "user", "content": prompt}],
        "completion_prompt": completion_prompt,
        "prompt_style": PROMPT_STYLE,
        "checks": checks,
        "source": source,
    }


def make_passphrase(seed: int) -> str:
    """A deterministic passphrase for the seed, e.g. 'violet-harbor-4821'."""
    rng = _rng("passphrase", seed)
    return f"{rng.choice(_PASSPHRASE_COLOURS)}-{rng.choice(_PASSPHRASE_NOUNS)}-{rng.randrange(1000, 10000)}"


def needle_sentence(needle: str) -> str:
    """The sentence that plants the needle in a document."""
    return f"The passphrase is {needle}. Remember it."


# --- documents ---------------------------------------------------------------------------------------


def pydoc_sections(keys: list[str] | None = None) -> list[tuple[str, str]]:
    """(title, text) pairs from pydoc_data.topics for the keys (all, sorted, when None)."""
    from pydoc_data.topics import topics

    return [(key, topics[key].strip()) for key in (sorted(topics) if keys is None else keys)]


def synthetic_sections(n_sections: int, words_per_section: int, seed: int) -> list[tuple[str, str]]:
    """(title, text) pairs of synthetic filler, reproducible for the seed."""
    return [
        (f"part-{index + 1}", synthetic_filler(words_per_section, seed * 1000 + index))
        for index in range(n_sections)
    ]


def make_document(
    sections: list[tuple[str, str]], needle: str | None, needle_position_fraction: float = 0.5
) -> str:
    """Sections under '## title' headers; the needle, if any, planted once as its own section."""
    blocks = [(title, text) for title, text in sections]
    if any(title == NEEDLE_TITLE for title, _ in blocks):
        raise ValueError(f"section title {NEEDLE_TITLE!r} is reserved for the needle")
    if needle is not None:
        position = round(min(max(needle_position_fraction, 0.0), 1.0) * len(blocks))
        blocks.insert(position, (NEEDLE_TITLE, needle_sentence(needle)))
    return "\n\n".join(f"{SECTION_HEADER.format(title=title)}\n\n{text}" for title, text in blocks)


def verbatim_recall(
    document: str,
    seed: int,
    needle: str | None = None,
    text_kind: str = "real",
    source: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Ask for the whole document back, word for word: the instruction first, then the document
    between tags, sized by the caller to fit the output budget. Asked for one marked section from
    the middle of a longer document, Qwen2.5-Coder-0.5B-Instruct copied from the document's start;
    asked to repeat a document placed before the instruction, it summarised the pydoc text."""
    prompt = (
        "Copy the following document exactly, word for word, keeping every line. Output only the "
        f"copy.\n\n{DOCUMENT_OPEN}\n{document}\n{DOCUMENT_CLOSE}"
    )
    completion = f"Document:\n\n{document}\n\nThe same document, repeated word for word:\n\n"
    checks: dict[str, Any] = {"reference_text": document}
    if needle is not None:
        checks["needle"] = needle
    full_source = {**(source or {}), "document_sha256": sha256_text(document)}
    return _workload("verbatim_recall", text_kind, prompt, completion, checks, full_source, seed)


def needle_question(
    document: str, needle: str, seed: int = 0, text_kind: str = "real", source: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Ask only for the passphrase planted in the document."""
    if document.count(needle) != 1:
        raise ValueError(f"the needle occurs {document.count(needle)} times in the document, need exactly 1")
    question = "What is the passphrase stated in the document above?"
    prompt = f"{document}\n\n{question} Answer with the passphrase only."
    completion = f"{document}\n\nQuestion: {question}\nAnswer: The passphrase is"
    full_source = {**(source or {}), "document_sha256": sha256_text(document)}
    return _workload("needle", text_kind, prompt, completion, {"needle": needle}, full_source, seed)


def _top_level_functions(source_text: str) -> list[str]:
    """Names of public top-level functions defined exactly once, in file order."""
    names = [node.name for node in ast.parse(source_text).body if isinstance(node, ast.FunctionDef)]
    return [name for name in names if not name.startswith("_") and names.count(name) == 1]


def _edit_workload(source_text: str, seed: int, text_kind: str, source: dict[str, Any]) -> dict[str, Any]:
    """Ask to rename one top-level function (chosen by seed) everywhere and return the whole file."""
    rng = _rng("edit", seed)
    names = _top_level_functions(source_text)
    if not names:
        raise ValueError("the file defines no public top-level function to rename")
    old_name = rng.choice(names)
    new_name = f"{old_name}_{rng.choice(_RENAME_SUFFIXES)}"
    if new_name in source_text:
        raise ValueError(f"new name {new_name!r} already occurs in the file")
    count = function_count(source_text)
    instruction = (
        f"Output this whole file again, all {count} functions in the same order, with one change: the "
        f"function `{old_name}` is renamed to `{new_name}` (its definition and every reference to it). "
        "Every other line stays exactly the same."
    )
    # The file first, then the instruction naming how much comes back: a 0.5B instruct model asked
    # first and told to "return the whole file" returned only the renamed function.
    prompt = f"```python\n{source_text}```\n\n{instruction}"
    completion = (
        f"Original file:\n```python\n{source_text}```\n\n"
        f"The whole file with `{old_name}` renamed to `{new_name}`:\n```python\n"
    )
    checks = {"rename": {"old": old_name, "new": new_name, "file": source_text}}
    full_source = {**source, "sha256": sha256_text(source_text)}
    return _workload("edit_file", text_kind, prompt, completion, checks, full_source, seed)


def module_source(module_name: str) -> tuple[str, dict[str, Any]]:
    """(source text, what identifies it) of a pure-Python standard-library module."""
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise ValueError(f"{module_name!r} is not a pure-Python standard-library module")
    source = {"kind": "stdlib_module", "module": module_name, "path": spec.origin,
              "python_version": platform.python_version()}  # fmt: skip
    return Path(spec.origin).read_text(encoding="utf-8"), source


def _functions(source_text: str) -> list[ast.FunctionDef]:
    try:
        return [node for node in ast.parse(source_text).body if isinstance(node, ast.FunctionDef)]
    except SyntaxError as exc:
        raise ValueError(f"the source does not parse as Python 3 (line {exc.lineno}: {exc.msg})") from None


def function_count(source_text: str) -> int:
    """How many top-level functions a Python source defines."""
    return len(_functions(source_text))


def functions_of(source_text: str, first: int, count: int) -> str:
    """A Python source from the start of its top-level function `first` (0-based) to the end of the
    count-th from there, the comments between them kept: a real file small enough to return whole."""
    functions = _functions(source_text)
    if count < 1 or first < 0 or first + count > len(functions):
        raise ValueError(f"the source has {len(functions)} top-level functions; {first}+{count} asked")
    lines = source_text.splitlines(keepends=True)
    return "".join(lines[functions[first].lineno - 1 : functions[first + count - 1].end_lineno])


def module_functions(module_name: str, first: int, count: int) -> str:
    """functions_of a standard-library module's source."""
    return functions_of(module_source(module_name)[0], first, count)


def edit_file(
    module_name: str = "colorsys", seed: int = 0, functions: tuple[int, int] | None = None
) -> dict[str, Any]:
    """edit_file on the real source of a standard-library module: the whole module, or the
    (first, count) run of its top-level functions."""
    text, source = module_source(module_name)
    if functions is not None:
        source["kind"] = "stdlib_module_functions"
    return edit_source(text, source, seed, functions)


def edit_source(
    text: str, source: dict[str, Any], seed: int, functions: tuple[int, int] | None = None
) -> dict[str, Any]:
    """edit_file on real Python source (a module's, or the user's own file): the whole text, or the
    (first, count) run of its top-level functions."""
    run = text if functions is None else functions_of(text, *functions)
    described = {**source, "functions": list(functions) if functions else None}
    return _edit_workload(run, seed, "real", described)


def synthetic_module(n_functions: int, seed: int) -> str:
    """A generated, repetitive Python module: similar small functions with filler docstrings."""
    rng = _rng("module", seed)
    verbs = ["scale", "shift", "count", "merge", "clip", "weigh"]
    nouns = ["values", "items", "rows", "points", "samples", "records"]
    names = [f"{rng.choice(verbs)}_{rng.choice(nouns)}_{index + 1}" for index in range(n_functions)]
    functions = [
        f"def {name}(values, factor={rng.randrange(2, 10)}):\n"
        f'    """{synthetic_filler(12, seed * 1000 + index)}"""\n'
        "    total = 0\n"
        "    for value in values:\n"
        "        total += value * factor\n"
        "    return total\n"
        for index, name in enumerate(names)
    ]
    calls = "".join(f"        {name}(values),\n" for name in names)
    run_all = f"def run_all(values):\n    return [\n{calls}    ]\n"
    return '"""Generated module (synthetic text)."""\n\n\n' + "\n\n".join([*functions, run_all])


def edit_file_synthetic(seed: int = 0, n_functions: int = 12) -> dict[str, Any]:
    """edit_file on a generated, repetitive Python module (text_kind synthetic)."""
    source_text = synthetic_module(n_functions, seed)
    source = {"kind": "synthetic_module", "n_functions": n_functions, "seed": seed}
    return _edit_workload(source_text, seed, "synthetic", source)


def new_code(seed: int = 0) -> dict[str, Any]:
    """Write new code from a short spec (fixed list, chosen by seed); no reference output."""
    index = seed % len(_NEW_CODE_SPECS)
    spec = _NEW_CODE_SPECS[index]
    prompt = f"Write {spec} in Python 3, with a docstring. Return only the code, in one ```python block."
    completion = f"# Task: write {spec}.\n# Solution in Python 3:\n\n"
    source = {"kind": "fixed_spec", "index": index}
    return _workload("new_code", "real", prompt, completion, {"python_code": True}, source, seed)


def explain(seed: int = 0) -> dict[str, Any]:
    """Explain a concept in prose (fixed list, chosen by seed); no reference output."""
    index = seed % len(_EXPLAIN_CONCEPTS)
    concept = _EXPLAIN_CONCEPTS[index]
    prompt = f"Explain {concept}. Write clear prose for a programmer, a few paragraphs, no code."
    completion = f"Question: Explain {concept}.\n\nAnswer, in plain prose:\n"
    source = {"kind": "fixed_concept", "index": index}
    return _workload("explain", "real", prompt, completion, {}, source, seed)
