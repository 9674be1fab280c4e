"""The results disk is read-only, from the start or from the middle of a series (real engine).

As root, chmod does not stop writes, so the results go to a tmpfs this test mounts and then
remounts read-only; where mounting is not allowed the tests are skipped and say why."""

import subprocess

import pytest

from tests.fault_kit import child_processes, job_context, warm_job
from whichshot.atomic import JsonlJournal
from whichshot.errors import WhichshotError
from whichshot.measure.protocol import run_job

pytestmark = pytest.mark.e2e


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@pytest.fixture
def results_disk(tmp_path):
    mountpoint = tmp_path / "results"
    mountpoint.mkdir()
    mounted = _mount("-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mountpoint))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to make read-only here: {mounted.stderr.strip()}")
    (mountpoint / "shots").mkdir()
    yield mountpoint
    subprocess.run(["umount", "--lazy", str(mountpoint)], check=True)


def _read_only(mountpoint, read_only: bool = True) -> None:
    _mount("-o", f"remount,{'ro' if read_only else 'rw'}", str(mountpoint)).check_returncode()


class _ReadOnlyAfterFirstShot:
    """Shot telemetry hooks that turn the disk read-only once shot 1 has been written."""

    def __init__(self, mountpoint) -> None:
        self.mountpoint, self.marks = mountpoint, 0

    def mark(self) -> None:
        self.marks += 1
        if self.marks == 3:  # shot 1: before and after; now shot 2 is about to start
            _read_only(self.mountpoint)

    def mark_soon(self) -> None:
        """A shot's first token: not counted (the disk turns read-only between shots)."""

    def summarize(self, *_args) -> dict:
        return {}


def test_read_only_results_stop_the_job_before_any_engine_starts(tmp_path, results_disk):
    _read_only(results_disk)
    ctx = job_context(tmp_path, warm_job(shots=2))
    journal = JsonlJournal(results_disk / "shots" / f"{ctx.job.job_id}.jsonl")
    with pytest.raises(WhichshotError) as caught:
        run_job(ctx, journal)
    message = str(caught.value)
    assert message.startswith(f"cannot write {journal.partial_path}: Read-only file system")
    assert "\n" not in message
    assert not (tmp_path / "logs").exists()  # no engine was started
    assert child_processes() == []


def test_disk_turning_read_only_mid_series_keeps_written_shots_and_a_rerun_resumes(tmp_path, results_disk):
    job = warm_job(shots=3)
    journal = JsonlJournal(results_disk / "shots" / f"{job.job_id}.jsonl")
    ctx = job_context(tmp_path, job, telemetry=_ReadOnlyAfterFirstShot(results_disk))
    with pytest.raises(WhichshotError, match="Read-only file system; the shots written before this"):
        run_job(ctx, journal)
    assert child_processes() == []  # the engine was stopped on the way out
    kept = journal.read_existing()
    assert [r["series_position"] for r in kept] == [1]
    assert not journal.final_path.exists()  # incomplete, so not under the final name

    _read_only(results_disk, read_only=False)
    records = run_job(job_context(tmp_path, job), journal)
    assert [r["series_position"] for r in records] == [1, 2, 3]
    assert records[0]["wall_start_utc"] == kept[0]["wall_start_utc"]  # kept, not re-run
    assert [r["process_start_reason"] for r in records[1:]] == ["resumed", "resumed"]
    assert all(r["status"] == "ok" for r in records)
    assert [r["series_position"] for r in journal.read_existing()] == [1, 2, 3]  # promoted by the caller
    assert child_processes() == []
