"""The user's own texts (issue 17): pinned by sha256 like a model, refused with one line naming the
file when they are not readable UTF-8 text, and the config forms that point at them."""

import colorsys
import copy
import hashlib
from pathlib import Path

import pytest
import yaml

from tests.pipeline import run_pipeline
from whichshot.config import check_config
from whichshot.errors import ChecksumMismatch, WhichshotError
from whichshot.prepare.corpus import load_corpus
from whichshot.prepare.user_texts import load_user_texts, pin_of
from whichshot.prepare.workloads import pydoc_sections

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
    notes.write_text(PYDOC_PARAGRAPHS)
    config = yaml.safe_load(SHIPPED.read_text())
    config["prompts"]["corpus"] = pinned(notes)
    config["workloads"]["texts"] = pinned(notes)
    config["workloads"]["edit_source"] = pinned(Path(colorsys.__file__))
    check_config(copy.deepcopy(config))
    config["prompts"]["corpus"] = {"path": str(notes)}
    with pytest.raises(WhichshotError, match="prompts.corpus: give a built-in corpus name or your own text"):
        check_config(config)


# Real text long enough for every use the shipped config makes of it (512-token prompts, a needle).
PYDOC_PARAGRAPHS = "\n\n".join(text for _title, text in pydoc_sections()[:40]) + "\n"
SEED_000 = Path("/work/shared/seeds/000_25a218ea045f421c.txt")


def with_texts(tmp_path: Path, key: str, content: bytes, names: list[str] | None = None) -> dict:
    """The shipped config with one user text (the others unset) holding content."""
    mine = tmp_path / ("mine.py" if key == "edit_source" else "mine.txt")
    mine.write_bytes(content)
    config = yaml.safe_load(SHIPPED.read_text())
    if key == "corpus":
        config["prompts"]["corpus"] = pinned(mine)
    else:
        config["workloads"][key] = pinned(mine)
    config["workloads"]["names"] = names or config["workloads"]["names"]
    return config


@pytest.mark.parametrize("key", ["corpus", "texts", "edit_source"])
@pytest.mark.parametrize(
    ("content", "said"), [(b"", "is empty"), ("déjà vu\n".encode("latin-1"), "is not UTF-8 text")]
)
def test_every_user_text_is_read_when_the_config_is_checked(tmp_path, key, content, said):
    with pytest.raises(WhichshotError, match=said) as refused:
        check_config(with_texts(tmp_path, key, content, ["verbatim_recall", "edit_file"]))
    assert str(tmp_path / "mine") in str(refused.value) and "\n" not in str(refused.value)


def test_a_text_without_blank_lines_has_a_paragraph_per_line(tmp_path):
    article = tmp_path / "article.txt"
    article.write_text("第一段。\n第二段，很短。\n\n\n")  # trailing blank lines are no separator
    assert [t for _, t in load_user_texts(pinned(article), "workloads.texts").sections()] == [
        "第一段。",
        "第二段，很短。",
    ]
    if SEED_000.is_file():  # seed 000: one paragraph per line, no blank line
        lines = [line for line in SEED_000.read_text(encoding="utf-8").splitlines() if line.strip()]
        sections = load_user_texts(pinned(SEED_000), "workloads.texts").sections()
        assert len(sections) == len(lines) > 100 and sections[0][1] == lines[0]


@pytest.mark.parametrize(
    ("names", "content", "said"),
    [
        (["needle"], b"one paragraph.\n\nand another.\n",
         "mine.txt has 2 paragraph(s); the needle plants its passphrase between whole paragraphs and needs "
         "at least 3"),
        (["needle"], b"short.\n\nshort.\n\nshort.\n",
         "mine.txt: the longest needle document it makes is 126 bytes of UTF-8, fewer than 256 tokens in any "
         "tokenizer; document_tokens=256 needs at least 256"),
        (["verbatim_recall"], b"a short text.\n",
         "mine.txt: the longest verbatim_recall document it makes is 13 bytes of UTF-8, fewer than 128 "
         "tokens in any tokenizer; document_tokens=256 needs at least 128"),
    ],
)  # fmt: skip
def test_a_document_text_too_short_for_its_workload_is_refused_with_its_length_and_the_minimum(
    tmp_path, names, content, said
):
    config = with_texts(tmp_path, "texts", content, names)
    config["workloads"].update(document_tokens=256, max_output_tokens=384)  # the sizes the messages state
    with pytest.raises(WhichshotError) as refused:
        check_config(config)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_an_edit_source_without_two_functions_is_refused_when_the_config_is_checked(tmp_path):
    with pytest.raises(WhichshotError, match=r"mine.py has 1 top-level function\(s\); the edit renames one"):
        check_config(with_texts(tmp_path, "edit_source", b"def only():\n    return 1\n", ["edit_file"]))


def test_a_corpus_too_short_for_the_longest_prompt_is_refused(tmp_path):
    with pytest.raises(WhichshotError) as refused:
        check_config(with_texts(tmp_path, "corpus", b"A few words of text.\n"))
    assert str(refused.value) == (
        f"prompts.corpus: {tmp_path / 'mine.txt'} is 20 bytes of UTF-8, fewer than 1021 tokens in any "
        "tokenizer; the 512-token prompts are cut at its start and its middle and need at least 1021: give "
        "more text or shorter prompts.lengths"
    )


def test_a_bad_user_text_stops_the_workflow_as_it_loads(tmp_path):
    config = with_texts(tmp_path, "texts", "Latin-1: déjà vu\n".encode("latin-1"), ["verbatim_recall"])
    config["claims"] = []  # the shipped config names them relative to the repository
    result = run_pipeline(tmp_path / "w", config, "--dry-run")
    assert result.returncode != 0
    printed = result.stdout + result.stderr
    said = [line for line in printed.splitlines() if str(tmp_path / "mine.txt") in line]
    assert said == [
        f"workloads.texts: {tmp_path / 'mine.txt'} is not UTF-8 text (byte 10: invalid continuation byte)"
    ], printed[-2000:]
    assert not (tmp_path / "w" / "results").exists()
