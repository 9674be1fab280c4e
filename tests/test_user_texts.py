"""The user's own texts (issue 17): pinned by sha256 like a model, refused with one line naming the
file when they are not readable UTF-8 text, and the config forms that point at them."""

import copy
import hashlib
from pathlib import Path

import pytest
import yaml

from whichshot.config import check_config
from whichshot.errors import ChecksumMismatch, WhichshotError
from whichshot.prepare.corpus import load_corpus
from whichshot.prepare.user_texts import load_user_texts, pin_of

SHIPPED = Path(__file__).resolve().parent.parent / "config" / "config.yaml"


def pinned(path: Path) -> dict[str, str]:
    return {"path": str(path), "sha256": pin_of(path)}


def test_a_file_is_pinned_by_its_bytes_and_a_changed_file_is_refused(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("First paragraph.\n\nSecond one,\nwith two lines.\n")
    spec = pinned(notes)
    assert spec["sha256"] == hashlib.sha256(notes.read_bytes()).hexdigest()
    texts = load_user_texts(spec, "prompts.corpus")
    assert [title for title, _ in texts.sections()] == ["notes.txt:1", "notes.txt:2"]
    notes.write_text("First paragraph, edited.\n")
    with pytest.raises(ChecksumMismatch, match="notes.txt is .*config pins"):
        load_user_texts(spec, "prompts.corpus")


def test_a_folder_is_pinned_by_its_manifest_in_path_order_hidden_names_skipped(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "two.md").write_text("two\n")
    (tmp_path / "a.py").write_text("def one():\n    return 1\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ignored\n")
    texts = load_user_texts(pinned(tmp_path), "workloads.texts")
    assert [f.name for f in texts.files] == ["a.py", "b/two.md"]
    assert load_corpus(pinned(tmp_path))["text"] == "def one():\n    return 1\n\ntwo"
    (tmp_path / "b" / "three.txt").write_text("three\n")  # a new file changes the pin
    with pytest.raises(ChecksumMismatch):
        load_user_texts({**pinned(tmp_path), "sha256": texts.sha256}, "workloads.texts")


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"", "is empty"),
        (b"  \n\n", "is empty"),
        (b"text\x00with a NUL", "is binary"),
        (b"caf\xe9 au lait", r"is not UTF-8 text \(byte 3"),
    ],
)
def test_unreadable_text_is_refused_with_one_line_naming_the_file(tmp_path, content, said):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    with pytest.raises(WhichshotError, match=said) as raised:
        load_user_texts(pinned(bad), "workloads.texts")
    assert str(bad) in str(raised.value) and "\n" not in str(raised.value)


def test_a_missing_path_and_an_empty_folder_are_refused(tmp_path):
    with pytest.raises(WhichshotError, match="does not exist"):
        load_user_texts({"path": str(tmp_path / "nope.txt"), "sha256": "0" * 64}, "prompts.corpus")
    (tmp_path / "empty").mkdir()
    with pytest.raises(WhichshotError, match="holds no file"):
        load_user_texts(pinned(tmp_path / "empty"), "prompts.corpus")


def test_the_config_takes_a_user_corpus_and_workload_texts_and_needs_their_pins(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("text\n")
    config = yaml.safe_load(SHIPPED.read_text())
    config["prompts"]["corpus"] = pinned(notes)
    config["workloads"]["texts"] = pinned(notes)
    config["workloads"]["edit_source"] = pinned(notes)
    check_config(copy.deepcopy(config))
    config["prompts"]["corpus"] = {"path": str(notes)}
    with pytest.raises(WhichshotError, match="prompts.corpus: give a built-in corpus name or your own text"):
        check_config(config)
