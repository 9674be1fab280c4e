"""Files that appear complete only when they are: write aside, then rename."""

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from whichshot.errors import WhichshotError


def write_text_atomic(path: Path, text: str) -> None:
    """Write text to a sibling temp file, fsync, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_json_atomic(path: Path, value: Any) -> None:
    """Write pretty JSON atomically."""
    write_text_atomic(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


class JsonlJournal:
    """Append-only JSONL beside the final output; promoted by rename when the job completes.

    Each record is flushed and fsynced, so a killed job keeps every finished record
    in `<output>.partial`, and the final name only ever holds a complete file.
    """

    def __init__(self, final_path: Path) -> None:
        self.final_path = final_path
        self.partial_path = final_path.with_name(final_path.name + ".partial")
        final_path.parent.mkdir(parents=True, exist_ok=True)

    def read_existing(self) -> list[dict[str, Any]]:
        """Records a previous, interrupted run already wrote (a torn last line is dropped)."""
        if not self.partial_path.exists():
            return []
        records = []
        for line in self.partial_path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break
        return records

    def rewrite(self, records: list[dict[str, Any]]) -> None:
        """Replace the journal with these records (drops a torn tail)."""
        write_text_atomic(self.partial_path, "".join(_line(r) for r in records))

    def append(self, record: dict[str, Any]) -> None:
        """Append one record durably."""
        self.append_all([record])

    def append_all(self, records: list[dict[str, Any]]) -> None:
        """Append records durably, with one write and one fsync."""
        with open(self.partial_path, "a", encoding="utf-8") as handle:
            handle.write("".join(_line(r) for r in records))
            handle.flush()
            os.fsync(handle.fileno())

    def publish(self) -> None:
        """Give the journal's records their final name as well, keeping the journal itself (a
        hard link; a copy where the filesystem has none): promote_together then drops the journal."""
        if not self.partial_path.exists():
            self.partial_path.touch()
        self.final_path.unlink(missing_ok=True)
        try:
            os.link(self.partial_path, self.final_path)
        except OSError:
            write_text_atomic(self.final_path, self.partial_path.read_text(encoding="utf-8"))

    def set_aside(self, why: str) -> Path | None:
        """Rename the journal out of the way (kept, never deleted): its records are not to be resumed."""
        if not self.partial_path.exists():
            return None
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        kept = self.partial_path.with_name(f"{self.partial_path.name}.{why}-{stamp}")
        os.replace(self.partial_path, kept)
        return kept

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the journal for one job: a second job of the same series stops with one line
        instead of appending to (or promoting) the same journal."""
        lock_path = self.partial_path.with_name(self.partial_path.name + ".lock")
        with open(lock_path, "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise WhichshotError(
                    f"another job is measuring this series ({lock_path} is held): wait for it to "
                    "finish or stop it; its shots are kept"
                ) from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n"


def promote_together(journals: list[JsonlJournal]) -> None:
    """Give a job's journals their final names (the job is complete), the first most precious: every
    final name appears before any journal goes, and the journals go in reverse order. A job killed
    in between fails, and the workflow then deletes its outputs: every journal still there is
    resumed by the rerun, so a kill before the last final name appears loses nothing, and one after
    it at most the later journals'."""
    for journal in journals:
        journal.publish()
    for journal in reversed(journals):
        journal.partial_path.unlink()
