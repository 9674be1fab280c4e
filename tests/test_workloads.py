"""Workload prompt construction: determinism, the marked document, needle, checkable edit, filler."""

from pathlib import Path

import pytest

from whichshot.prepare.filler import synthetic_filler
from whichshot.prepare.workloads import (
    DOCUMENT_CLOSE,
    DOCUMENT_OPEN,
    edit_file,
    edit_file_synthetic,
    explain,
    make_document,
    make_passphrase,
    module_functions,
    needle_question,
    new_code,
    pydoc_sections,
    synthetic_sections,
    verbatim_recall,
)
from whichshot.shots.quality import needle_found, rename_applied

KEYS = ["assert", "break", "continue", "pass", "return", "global"]


def _document(needle: str | None, fraction: float = 0.5) -> str:
    return make_document(pydoc_sections(KEYS), needle, fraction)


def test_passphrase_deterministic_and_seed_dependent() -> None:
    assert make_passphrase(1) == make_passphrase(1)
    assert len({make_passphrase(seed) for seed in range(20)}) > 15
    colour, noun, number = make_passphrase(7).split("-")
    assert colour.isalpha() and noun.isalpha() and number.isdigit()


@pytest.mark.parametrize("fraction", [0.0, 0.3, 0.5, 1.0])
def test_needle_present_exactly_once(fraction: float) -> None:
    needle = make_passphrase(3)
    document = _document(needle, fraction)
    assert document.count(needle) == 1
    assert needle_found(document, needle)
    question = needle_question(document, needle)
    assert question["checks"] == {"needle": needle}
    assert question["messages"][0]["content"].count(needle) == 1
    assert question["completion_prompt"].count(needle) == 1


def test_needle_position_follows_fraction() -> None:
    needle = make_passphrase(3)
    early, late = _document(needle, 0.0), _document(needle, 1.0)
    assert early.index(needle) < len(early) * 0.1
    assert late.index(needle) > len(late) * 0.9


def test_verbatim_recall_marks_the_document_once_and_asks_for_it_whole() -> None:
    needle = make_passphrase(4)
    document = _document(needle)
    workload = verbatim_recall(document, seed=0, needle=needle)
    content = workload["messages"][0]["content"]
    assert content.count(DOCUMENT_OPEN) == 1 and content.count(DOCUMENT_CLOSE) == 1
    assert f"{DOCUMENT_OPEN}\n{document}\n{DOCUMENT_CLOSE}" in content
    assert workload["checks"] == {"reference_text": document, "needle": needle}
    assert workload["completion_prompt"].count(document) == 1
    assert workload["text_kind"] == "real"


def test_synthetic_recall_variant() -> None:
    needle = make_passphrase(6)
    document = make_document(synthetic_sections(5, 200, seed=1), needle, 0.5)
    assert document.count(needle) == 1
    workload = verbatim_recall(document, seed=0, needle=needle, text_kind="synthetic")
    assert workload["text_kind"] == "synthetic"
    assert workload["checks"]["reference_text"] == document
    assert document == make_document(synthetic_sections(5, 200, seed=1), needle, 0.5)


def test_edit_file_is_checkable() -> None:
    workload = edit_file("textwrap", seed=0)
    rename = workload["checks"]["rename"]
    original = Path(workload["source"]["path"]).read_text(encoding="utf-8")
    assert rename["file"] == original
    assert original in workload["messages"][0]["content"]
    edited = original.replace(f"def {rename['old']}(", f"def {rename['new']}(")
    assert rename_applied(original, rename["old"], rename["new"])["renamed"] is False
    assert rename_applied(edited, rename["old"], rename["new"])["renamed"] is True
    assert workload["text_kind"] == "real"


@pytest.mark.parametrize("module_name", ["textwrap", "colorsys", "bisect", "shlex"])
def test_edit_file_deterministic_per_seed(module_name: str) -> None:
    assert edit_file(module_name, seed=3) == edit_file(module_name, seed=3)
    renames = {edit_file(module_name, seed=seed)["checks"]["rename"]["old"] for seed in range(10)}
    assert len(renames) > 1


def test_module_functions_are_whole_real_functions() -> None:
    three = module_functions("colorsys", 0, 3)
    assert three.startswith("def rgb_to_yiq(") and three.count("\ndef ") == 2
    assert module_functions("colorsys", 0, 4).startswith(three)
    assert module_functions("colorsys", 1, 2).startswith("def yiq_to_rgb(")
    workload = edit_file("colorsys", seed=1, functions=(0, 3))
    assert workload["checks"]["rename"]["file"] == three
    assert workload["checks"]["rename"]["old"] in {"rgb_to_yiq", "yiq_to_rgb", "rgb_to_hls"}
    with pytest.raises(ValueError):
        module_functions("colorsys", 5, 99)


def test_edit_file_synthetic_is_checkable() -> None:
    workload = edit_file_synthetic(seed=2)
    assert workload == edit_file_synthetic(seed=2)
    assert workload["text_kind"] == "synthetic"
    rename = workload["checks"]["rename"]
    content = workload["messages"][0]["content"]  # the instruction names the old function once
    assert rename_applied(content, rename["old"], rename["new"]) == {"renamed": False, "old_refs_left": 3}


@pytest.mark.parametrize("builder", [new_code, explain])
def test_prose_and_code_builders(builder) -> None:
    assert builder(1) == builder(1)
    assert builder(0)["messages"] != builder(1)["messages"]
    workload = builder(0)
    assert workload["checks"] == ({"python_code": True} if builder is new_code else {})
    assert workload["completion_prompt"]
    assert set(workload) >= {"workload", "text_kind", "messages", "completion_prompt", "prompt_style"}


def test_filler_reproducible_and_seed_dependent() -> None:
    text = synthetic_filler(500, seed=1)
    assert text == synthetic_filler(500, seed=1)
    assert text != synthetic_filler(500, seed=2)
    assert len(text.split()) == 500
    assert len(set(text.split("."))) > 20  # repetitive vocabulary, but not one sentence repeated
    assert len(set(text.split())) < 100
