"""Synthetic filler: repetitive but not constant English-like text, reproducible for a seed."""

import random
import re

_ADJECTIVES = ["quiet", "bright", "small", "old", "green", "heavy", "simple", "early", "warm", "narrow"]
_NOUNS = ["river", "garden", "window", "village", "teacher", "market", "bridge", "letter", "engine", "forest"]
_VERBS = ["follows", "watches", "reaches", "crosses", "opens", "finds", "carries", "passes", "holds", "keeps"]
_PLACES = ["the hill", "the road", "the harbor", "the station", "the valley", "the square"]
_TIMES = ["in the morning", "every evening", "after the rain", "before noon", "on most days"]
_TEMPLATES = [
    "The {adj} {noun} {verb} the {adj2} {noun2} near {place}.",
    "{time_cap}, the {adj} {noun} {verb} the {noun2}.",
    "Every {noun} {verb} the {adj} {noun2} {time}.",
    "The {noun} near {place} is {adj}, and the {noun2} is {adj2}.",
    "The {adj} {noun} {verb} the {noun2} and then {verb2} the {adj2} {noun}.",
]
_SENTENCES_PER_PARAGRAPH = 5


def _sentence(rng: random.Random) -> str:
    """One sentence from a random template with random words."""
    time = rng.choice(_TIMES)
    return rng.choice(_TEMPLATES).format(
        adj=rng.choice(_ADJECTIVES),
        adj2=rng.choice(_ADJECTIVES),
        noun=rng.choice(_NOUNS),
        noun2=rng.choice(_NOUNS),
        verb=rng.choice(_VERBS),
        verb2=rng.choice(_VERBS),
        place=rng.choice(_PLACES),
        time=time,
        time_cap=time[0].upper() + time[1:],
    )


def synthetic_filler(n_words: int, seed: int) -> str:
    """Exactly n_words words of template sentences, in paragraphs, reproducible for the seed."""
    rng = random.Random(seed)  # noqa: S311 (reproducible text, not secrets)
    paragraphs: list[list[str]] = []
    n_so_far = 0
    while n_so_far < n_words:
        if not paragraphs or len(paragraphs[-1]) == _SENTENCES_PER_PARAGRAPH:
            paragraphs.append([])
        sentence = _sentence(rng)
        paragraphs[-1].append(sentence)
        n_so_far += len(sentence.split())
    text = "\n\n".join(" ".join(paragraph) for paragraph in paragraphs)
    return _truncate_words(text, n_words)


def _truncate_words(text: str, n_words: int) -> str:
    """Text cut after its n_words-th word, keeping paragraph breaks, ending with a full stop."""
    if n_words <= 0:
        return ""
    matches = list(re.finditer(r"\S+", text))
    cut = matches[n_words - 1].end()
    head = text[:cut]
    return head if head.endswith(".") else head.rstrip(",") + "."
