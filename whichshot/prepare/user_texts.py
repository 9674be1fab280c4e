"""The user's own texts: a file or a folder of files, pinned by sha256 like a model.

A file's pin is the sha256 of its bytes; a folder's is the sha256 of its manifest, one line
"<relative path>\\t<sha256 of the file>\\n" per regular file below it (hidden names skipped), in
sorted path order: `python -m whichshot.prepare.user_texts PATH` prints it. Every file must be
non-empty UTF-8 text no larger than MAX_FILE_BYTES; anything else is refused with one line that
names the file. The config check reads every user text when the workflow loads (user_inputs.py).
"""

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

from whichshot.errors import ChecksumMismatch, WhichshotError
from whichshot.hashing import sha256_file

MAX_FILE_BYTES = 16 * 1024 * 1024  # a prompt source, not a dataset: larger files are refused


@dataclass(frozen=True)
class TextFile:
    name: str  # the path relative to the pinned folder ("/"-joined), or the file's own name
    text: str


@dataclass(frozen=True)
class UserTexts:
    path: str
    sha256: str
    files: tuple[TextFile, ...]

    def sections(self) -> list[tuple[str, str]]:
        """(title, text) of every paragraph of every file, in order: blank lines end a paragraph; in
        a file with no blank line (an article with one paragraph per line, as Chinese text often
        is) every line is one."""
        found = []
        for file in self.files:
            text = file.text.replace("\r\n", "\n").strip("\n")
            paragraphs = [p.strip("\n") for p in text.split("\n\n" if "\n\n" in text else "\n")]
            found += [(f"{file.name}:{i + 1}", p) for i, p in enumerate(paragraphs) if p.strip()]
        return found

    def joined(self) -> str:
        """Every file's text, blank-line separated, in path order."""
        return "\n\n".join(file.text.strip("\n") for file in self.files)


def user_source_pin(source: dict) -> str | None:
    """The pin of the user's input a prompt was cut from, per its recorded source (the user's
    texts, a trace, the user's edit file); None for built-in text."""
    if source.get("corpus") in ("user_files", "trace"):
        return source.get("sha256")
    return source.get("file_sha256") if source.get("kind") == "user_file" else None


def pin_of(path: Path) -> str:
    """The sha256 that pins a file (its bytes) or a folder (its manifest)."""
    if path.is_dir():
        return hashlib.sha256(_manifest(path).encode("utf-8")).hexdigest()
    return sha256_file(path)


def load_user_texts(spec: dict[str, str], where: str) -> UserTexts:
    """The texts at spec["path"], refused unless they match spec["sha256"] and are all readable text."""
    path = Path(spec["path"]).expanduser()
    if not path.exists():
        raise WhichshotError(f"{where}: {path} does not exist")
    files = [path] if path.is_file() else _files_below(path)
    if not files:
        raise WhichshotError(f"{where}: {path} holds no file")
    texts = tuple(
        _read_text(file, file.name if file == path else _relative(file, path), where) for file in files
    )
    actual = pin_of(path)
    if actual != spec["sha256"].lower():
        raise ChecksumMismatch(
            f"{where}: sha256 of {path} is {actual}, config pins {spec['sha256']}; refusing to use it "
            "(python -m whichshot.prepare.user_texts PATH prints the pin)"
        )
    return UserTexts(str(path), actual, texts)


def _files_below(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def _relative(file: Path, folder: Path) -> str:
    return file.relative_to(folder).as_posix()


def _manifest(folder: Path) -> str:
    return "".join(f"{_relative(f, folder)}\t{sha256_file(f)}\n" for f in _files_below(folder))


def _read_text(file: Path, name: str, where: str) -> TextFile:
    try:
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            raise WhichshotError(f"{where}: {file} is {size} bytes, over the {MAX_FILE_BYTES}-byte limit")
        data = file.read_bytes()
    except OSError as exc:
        raise WhichshotError(f"{where}: cannot read {file}: {exc.strerror or exc}") from None
    if not data.strip():
        raise WhichshotError(f"{where}: {file} is empty")
    if b"\0" in data:
        raise WhichshotError(f"{where}: {file} is binary (it holds NUL bytes), not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WhichshotError(f"{where}: {file} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    return TextFile(name, text)


if __name__ == "__main__":
    print(pin_of(Path(sys.argv[1])))
