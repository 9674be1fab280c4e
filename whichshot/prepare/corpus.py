"""Real text for the prompts: the standard library's own documentation (every Python installation
ships it), or the user's own files pinned by sha256."""

import platform
from pathlib import Path
from typing import Any

from whichshot.hashing import sha256_text
from whichshot.prepare.user_texts import load_user_texts


def pydoc_topics_text() -> str:
    """All of pydoc_data/topics.py's help topics, in sorted key order, blank-line separated."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key].strip() for key in sorted(topics))


CORPORA = {"pydoc_topics": pydoc_topics_text}


def load_corpus(spec: str | dict[str, Any]) -> dict[str, str]:
    """The corpus text with what identifies it: a built-in corpus by name (its sha256 depends on the
    Python version), or the user's files ({path, sha256}: their pin)."""
    if isinstance(spec, dict):
        texts = load_user_texts(spec, "prompts.corpus")
        return {"name": f"user_files:{Path(texts.path).name}", "text": texts.joined(), "sha256": texts.sha256,
                "python_version": platform.python_version(), "path": texts.path}  # fmt: skip
    text = CORPORA[spec]()
    return {
        "name": spec,
        "text": text,
        "sha256": sha256_text(text),
        "python_version": platform.python_version(),
    }
