"""Copy fraction, first divergence, needle and rename checks on hand-made inputs."""

import pytest

from whichshot.measure.quality import copy_fraction, first_divergence, needle_found, rename_applied

PROMPT = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]


def test_copy_fraction_empty_output_is_none() -> None:
    assert copy_fraction([], PROMPT, k=3) is None


def test_copy_fraction_full_copy() -> None:
    assert copy_fraction([3, 4, 5, 6, 7], PROMPT, k=3) == 1.0


def test_copy_fraction_span_shorter_than_k_not_counted() -> None:
    # [1, 2] occurs in the prompt but is shorter than k=3; [50, 51] not at all
    assert copy_fraction([1, 2, 50, 51], PROMPT, k=3) == 0.0


def test_copy_fraction_partial() -> None:
    # [2, 3, 4] copied (3 tokens), then 5 new tokens, then [7, 8] too short
    output = [2, 3, 4, 90, 91, 92, 93, 94, 7, 8]
    assert copy_fraction(output, PROMPT, k=3) == pytest.approx(0.3)


def test_copy_fraction_overlapping_spans_counted_once() -> None:
    # [1, 2, 3] and [2, 3, 4] both match at k=3; their union [1, 2, 3, 4] counts 4 tokens, not 6
    assert copy_fraction([1, 2, 3, 4, 99, 98], PROMPT, k=3) == pytest.approx(4 / 6)


def test_copy_fraction_adjacent_spans_from_different_places() -> None:
    # [8, 9, 10] then [1, 2, 3]: two separate prompt spans of length k, all 6 tokens covered
    assert copy_fraction([8, 9, 10, 1, 2, 3], PROMPT, k=3) == 1.0


def test_copy_fraction_output_shorter_than_k() -> None:
    assert copy_fraction([1, 2], PROMPT, k=3) == 0.0


def test_copy_fraction_default_k_is_8() -> None:
    assert copy_fraction(PROMPT[:7], PROMPT) == 0.0
    assert copy_fraction(PROMPT[:8], PROMPT) == 1.0


def test_first_divergence_identical_is_none() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([], []) is None


def test_first_divergence_differing_token() -> None:
    assert first_divergence([1, 2, 3, 4], [1, 2, 9, 4]) == 2
    assert first_divergence([1], [2]) == 0


def test_first_divergence_length_mismatch_at_shorter_length() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3, 4, 5]) == 3
    assert first_divergence([1, 2, 3], [1, 2]) == 2
    assert first_divergence([], [7]) == 0


def test_needle_found_ignores_case_and_whitespace() -> None:
    assert needle_found("The passphrase is\n  VIOLET-harbor-4821.", "violet-harbor-4821")
    assert not needle_found("The passphrase is violet-harbor-4822.", "violet-harbor-4821")


def test_rename_applied() -> None:
    original = "def fill(text):\n    return wrap(text)\n\nx = fill('a')\n"
    edited = original.replace("fill", "fill_v2")
    assert rename_applied(original, "fill", "fill_v2") == {"renamed": False, "old_refs_left": 2}
    assert rename_applied(edited, "fill", "fill_v2") == {"renamed": True, "old_refs_left": 0}
    half_done = "def fill_v2(text):\n    return wrap(text)\n\nx = fill('a')\n"
    assert rename_applied(half_done, "fill", "fill_v2") == {"renamed": True, "old_refs_left": 1}
