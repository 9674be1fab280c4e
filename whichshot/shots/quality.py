"""Output-quality checks on token ids and text: copy from the prompt, repetition of the output's
own earlier spans, loops, divergence, needle, rename, recall similarity, code that parses."""

import ast
import difflib
import re


def _kgrams(ids: list[int], k: int) -> set[tuple[int, ...]]:
    """Every contiguous k-gram of ids."""
    return {tuple(ids[i : i + k]) for i in range(len(ids) - k + 1)}


def copy_fraction(output_ids: list[int], prompt_ids: list[int], k: int = 8) -> float | None:
    """Share of output tokens inside a span of >= k consecutive tokens that also occurs in the prompt."""
    if not output_ids:
        return None
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    prompt_grams = _kgrams(prompt_ids, k)
    covered_until = 0  # output index up to which tokens are known to be covered (exclusive)
    covered_tokens = 0
    for start in range(len(output_ids) - k + 1):
        if tuple(output_ids[start : start + k]) in prompt_grams:
            end = start + k
            covered_tokens += end - max(start, covered_until)
            covered_until = end
    return covered_tokens / len(output_ids)


def self_repetition(ids: list[int], k: int = 8) -> float | None:
    """Share of tokens inside a span of >= k consecutive tokens that already occurred earlier in
    the same sequence (a loop, a list of near-identical lines: output that repeats itself)."""
    if not ids:
        return None
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    seen: set[tuple[int, ...]] = set()
    covered_until = covered_tokens = 0
    for start in range(len(ids) - k + 1):
        gram = tuple(ids[start : start + k])
        if gram in seen:
            end = start + k
            covered_tokens += end - max(start, covered_until)
            covered_until = end
        seen.add(gram)
    return covered_tokens / len(ids)


def loop_period(ids: list[int], min_tokens: int = 16) -> int | None:
    """The period of a degenerate loop: the smallest p such that the last half of the output is one
    span of p tokens repeated (every token there equals the token p before it, at least two whole
    repeats). None when there is no such loop or the output is shorter than min_tokens."""
    n = len(ids)
    if n < min_tokens:
        return None
    half = n // 2
    for period in range(1, (n - half) // 2 + 1):
        if all(ids[i] == ids[i - period] for i in range(half, n)):
            return period
    return None


def first_divergence(reference_ids: list[int], candidate_ids: list[int]) -> int | None:
    """Index of the first differing token (a length mismatch counts at the shorter length); None if equal."""
    for index, (ref, cand) in enumerate(zip(reference_ids, candidate_ids, strict=False)):
        if ref != cand:
            return index
    if len(reference_ids) != len(candidate_ids):
        return min(len(reference_ids), len(candidate_ids))
    return None


def _normalise(text: str) -> str:
    """Lower-case text with runs of whitespace collapsed to one space."""
    return " ".join(text.split()).lower()


def needle_found(output_text: str, needle: str) -> bool:
    """Whether the needle occurs in the output, ignoring case and whitespace differences."""
    return _normalise(needle) in _normalise(output_text)


def contains_verbatim(output_text: str, reference_text: str) -> bool:
    """The reference appears in the output word for word (case kept, whitespace runs collapsed)."""
    return " ".join(reference_text.split()) in " ".join(output_text.split())


def rename_applied(output_text: str, old_name: str, new_name: str) -> dict[str, bool | int]:
    """Whether `def new_name(` is present and `def old_name(` gone; how many `old_name` words remain."""
    new_def = re.search(rf"\bdef\s+{re.escape(new_name)}\s*\(", output_text) is not None
    old_def = re.search(rf"\bdef\s+{re.escape(old_name)}\s*\(", output_text) is not None
    old_refs_left = len(re.findall(rf"\b{re.escape(old_name)}\b", output_text))
    return {"renamed": new_def and not old_def, "old_refs_left": old_refs_left}


def _words(text: str) -> list[str]:
    return text.split()


def recall_similarity(output_text: str, reference_text: str) -> float:
    """How close the best-matching stretch of the output is to the reference, word by word: the
    share of the reference's words that difflib matches in order (1.0 = every word, in order)."""
    reference = _words(reference_text)
    if not reference:
        return 1.0
    matcher = difflib.SequenceMatcher(None, reference, _words(output_text), autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) / len(reference)


def code_blocks(text: str) -> str:
    """The code of the output: its fenced blocks joined (an unclosed last fence runs to the end),
    or the whole text when it has no fence."""
    parts = re.split(r"^```[\w+-]*[ \t]*$", text, flags=re.MULTILINE)
    if len(parts) == 1:
        return text
    return "\n".join(parts[1::2])


def python_parses(text: str) -> bool:
    """The output's code parses as Python 3 (and is not empty)."""
    code = code_blocks(text)
    if not code.strip():
        return False
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def rest_intact(output_text: str, original: str, old_name: str, new_name: str) -> bool:
    """The returned file equals the original once the new name is read as the old one: nothing but
    the rename changed (trailing spaces and blank lines ignored)."""
    returned = re.sub(rf"\b{re.escape(new_name)}\b", old_name, code_blocks(output_text))
    return _lines(returned) == _lines(original)
