"""Output-quality checks on token ids and text: copy fraction, divergence, needle, rename."""

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
