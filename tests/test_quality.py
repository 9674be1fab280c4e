"""Copy fraction, self-repetition and loops, first divergence, needle, rename, recall and code checks
on hand-made inputs."""

import pytest

from whichshot.shots.quality import (
    copy_fraction,
    first_divergence,
    loop_period,
    needle_found,
    python_parses,
    recall_similarity,
    rename_applied,
    rest_intact,
    self_repetition,
)

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


def test_self_repetition_counts_tokens_in_spans_seen_earlier_in_the_same_output() -> None:
    assert self_repetition([], k=3) is None
    assert self_repetition(list(range(20)), k=3) == 0.0
    # [1, 2, 3] then [1, 2, 3] again: the second three repeat the first
    assert self_repetition([1, 2, 3, 1, 2, 3], k=3) == pytest.approx(0.5)
    # a span copied from a prompt is not self-repetition: only the output's own earlier text counts
    assert self_repetition([5, 6, 7, 8, 9], k=3) == 0.0


def test_loop_period_finds_a_repeated_last_half_and_nothing_else() -> None:
    intro = list(range(100, 120))
    assert loop_period(intro + [1, 2, 3, 4, 5] * 8) == 5
    assert loop_period([7] * 30) == 1
    assert loop_period(list(range(40))) is None
    assert loop_period([1, 2, 3] * 4) is None  # shorter than min_tokens: not judged
    # one changed token in the last half breaks the loop
    tail = [1, 2, 3, 4, 5] * 8
    tail[-3] = 99
    assert loop_period(intro + tail) is None


def test_recall_similarity_is_the_share_of_reference_words_back_in_order() -> None:
    reference = "one two three four five six seven eight nine ten"
    assert recall_similarity(reference, reference) == 1.0
    assert recall_similarity("Here it is:\n" + reference + "\nDone.", reference) == 1.0
    assert recall_similarity(reference.replace("seven", "SEVEN"), reference) == pytest.approx(0.9)
    assert recall_similarity("ten nine eight", reference) == pytest.approx(0.1)


def test_python_parses_reads_the_fenced_code_or_the_whole_text() -> None:
    assert python_parses("Sure:\n```python\ndef f(x):\n    return x\n```\nDone.")
    assert python_parses("def f(x):\n    return x\n")
    assert not python_parses("```python\ndef f(x:\n    return x\n```")
    assert not python_parses("```python\n```")
    assert python_parses("```python\nx = 1\n")  # an unclosed fence runs to the end


def test_rest_intact_accepts_only_the_rename() -> None:
    original = "def a(x):\n    return b(x)\n\n\ndef b(x):\n    return x\n"
    renamed = original.replace("def b(", "def b_v2(").replace("return b(", "return b_v2(")
    assert rest_intact(f"```python\n{renamed}```", original, "b", "b_v2")
    assert rest_intact(renamed.replace("\n\n\n", "\n"), original, "b", "b_v2")  # blank lines ignored
    assert not rest_intact(renamed.replace("def a(", "def a_v2("), original, "b", "b_v2")
    assert not rest_intact(renamed.split("def b_v2")[0], original, "b", "b_v2")  # a function dropped
