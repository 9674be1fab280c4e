"""Workload prompt construction: determinism, markers, needle, checkable edit, filler."""

from pathlib import Path

import pytest

from whichshot.measure.quality import needle_found, rename_applied
from whichshot.prepare.filler import synthetic_filler
from whichshot.prepare.workloads import (
    BEGIN_MARKER,
    END_MARKER,
    edit_file,
    edit_file_synthetic,
    explain,
    make_document,
    make_passphrase,
    needle_question,
    new_code,
    pydoc_sections,
    synthetic_sections,
    verbatim_recall,
)

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


def test_verbatim_recall_markers_once_and_reference_is_section() -> None:
    needle = make_passphrase(4)
    workload = verbatim_recall(_document(needle), "continue", seed=0, needle=needle)
    content = workload["messages"][0]["content"]
    begin = BEGIN_MARKER.format(title="continue")
    assert content.count(begin + "\n") == 1
    assert content.count(END_MARKER + "\n") == 1
    reference = workload["checks"]["reference_text"]
    assert reference == dict(pydoc_sections(["continue"]))["continue"]
    assert f"{begin}\n{reference}\n{END_MARKER}" in content
    assert workload["checks"]["needle"] == needle
    assert workload["completion_prompt"].endswith(begin + "\n")
    assert workload["text_kind"] == "real"
    assert workload["source"]["section"] == "continue"


def test_verbatim_recall_seed_picks_section_deterministically() -> None:
    document = _document(make_passphrase(5))
    first, again = verbatim_recall(document, None, seed=2), verbatim_recall(document, None, seed=2)
    assert first == again
    assert first["source"]["section"] in KEYS[:-1]
    chosen = {verbatim_recall(document, None, seed=seed)["source"]["section"] for seed in range(20)}
    assert len(chosen) > 1


def test_verbatim_recall_rejects_missing_or_needle_section() -> None:
    document = _document(make_passphrase(5))
    with pytest.raises(ValueError):
        verbatim_recall(document, "no-such-section", seed=0)
    with pytest.raises(ValueError):
        verbatim_recall(document, "Note", seed=0)


def test_synthetic_recall_variant() -> None:
    needle = make_passphrase(6)
    document = make_document(synthetic_sections(5, 200, seed=1), needle, 0.5)
    assert document.count(needle) == 1
    workload = verbatim_recall(document, "part-2", seed=0, needle=needle, text_kind="synthetic")
    assert workload["text_kind"] == "synthetic"
    assert len(workload["checks"]["reference_text"].split()) == 200
    assert document == make_document(synthetic_sections(5, 200, seed=1), needle, 0.5)


def test_edit_file_is_checkable() -> None:
    workload = edit_file("textwrap", seed=0)
    rename = workload["checks"]["rename"]
    original = Path(workload["source"]["path"]).read_text(encoding="utf-8")
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
    assert workload["checks"] == {}
    assert workload["completion_prompt"]
    assert set(workload) >= {"workload", "text_kind", "messages", "completion_prompt", "prompt_style"}


def test_filler_reproducible_and_seed_dependent() -> None:
    text = synthetic_filler(500, seed=1)
    assert text == synthetic_filler(500, seed=1)
    assert text != synthetic_filler(500, seed=2)
    assert len(text.split()) == 500
    assert len(set(text.split("."))) > 20  # repetitive vocabulary, but not one sentence repeated
    assert len(set(text.split())) < 100
