"""Real text every Python installation ships: the standard library's own documentation."""

import platform

from whichshot.hashing import sha256_text


def pydoc_topics_text() -> str:
    """All of pydoc_data/topics.py's help topics, in sorted key order, blank-line separated."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key].strip() for key in sorted(topics))


CORPORA = {"pydoc_topics": pydoc_topics_text}


def load_corpus(name: str) -> dict[str, str]:
    """The corpus text with what identifies it (its sha256 depends on the Python version)."""
    text = CORPORA[name]()
    return {
        "name": name,
        "text": text,
        "sha256": sha256_text(text),
        "python_version": platform.python_version(),
    }
