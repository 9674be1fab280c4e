"""Write config/traces/example.jsonl: a request trace of real work on text every Python install
ships (stdlib sources, pydoc_data's topics), plus two requests on generated text, and print its
sha256 for config/trace-example.yaml.

The file is committed: the stdlib's text differs between Python versions, so the trace is built
once and pinned, not rebuilt at run time. Usage: python tools/make_trace_example.py [OUT]
"""

import json
import sys
from pathlib import Path

from whichshot.prepare.user_texts import pin_of
from whichshot.prepare.workloads import (
    module_functions,
    pydoc_sections,
    synthetic_module,
    synthetic_sections,
)

OUT = Path(__file__).resolve().parent.parent / "config" / "traces" / "example.jsonl"


def _ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def requests() -> list[dict]:
    """Requests a programmer sends in a day: edit, recall, summarise, explain, answer, write."""
    topics = dict(pydoc_sections(["assert", "with", "lambda", "for", "global", "pass"]))
    colorsys = module_functions("colorsys", 0, 3)
    textwrap = module_functions("textwrap", 0, 2)
    filler = "\n\n".join(text for _, text in synthetic_sections(2, 60, 7))
    generated = synthetic_module(4, 7)
    return [
        {"id": "edit-colorsys", "messages": _ask(
            f"```python\n{colorsys}```\n\nReturn this whole file with the function `rgb_to_yiq` renamed to "
            "`rgb_to_yiq_v2`. Every other line stays the same.")},
        {"id": "recall-assert", "messages": _ask(
            f"Copy the following text exactly, word for word:\n\n{topics['assert']}")},
        {"id": "summarise-with", "messages": _ask(
            f"{topics['with']}\n\nSummarise the text above in three sentences.")},
        {"id": "explain-for", "messages": _ask(
            f"{topics['for']}\n\nExplain, for a beginner, how the for statement described above uses "
            "iterators.")},
        {"id": "answer-lambda", "messages": _ask(
            f"{topics['lambda']}\n\nCan a lambda expression contain statements? Quote the sentence of "
            "the text that says so.")},
        {"id": "refactor-textwrap", "messages": _ask(
            f"```python\n{textwrap}```\n\nAdd type hints to every function of this code and return the "
            "whole code.")},
        {"id": "new-code", "messages": _ask(
            "Write a Python function that parses an ISO 8601 date such as 2024-03-05 into a (year, month, "
            "day) tuple, with a docstring and two doctests.")},
        {"id": "explain-global", "messages": _ask(
            "Explain the difference between the global and nonlocal statements in Python.")},
        {"id": "recall-synthetic", "text_kind": "synthetic", "messages": _ask(
            f"Copy the following text exactly, word for word:\n\n{filler}")},
        {"id": "edit-synthetic", "text_kind": "synthetic", "messages": _ask(
            f"```python\n{generated}```\n\nReturn this whole file with `run_all` renamed to `run_every`. "
            "Every other line stays the same.")},
    ]  # fmt: skip


def main(out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests()), encoding="utf-8")
    print(f"{out}\t{pin_of(out)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
