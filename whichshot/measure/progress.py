"""Progress a person can read: which series is measuring, shot k of n, and an estimate of the time
left from the grid and the shots measured so far.

The estimate is the seconds per shot of the series already finished (their first shot's request to
their last shot's end, process starts and rests included) times the shots still to measure; before
any series has finished there is none. It is printed, never stored: a measurement's rows do not
depend on it."""

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from whichshot.measure.grid import Job


@dataclass(frozen=True)
class GridProgress:
    """Where the run stands as one series starts."""

    series_done: int
    series_total: int
    shots_left: int  # of the unfinished series, this one included
    seconds_per_shot: float | None  # over the finished series (None before the first)

    def line(self, job_id: str, position: int, series_length: int) -> str:
        """The line printed before shot `position` of series `job_id`."""
        left = self.shots_left - (position - 1)
        per_shot = self.seconds_per_shot
        eta = f"about {_duration(left * per_shot)} left, " if per_shot is not None else ""
        return (
            f"whichshot: {self.series_done} of {self.series_total} series done; measuring {job_id}: "
            f"shot {position} of {series_length} ({eta}{left} shots to go)"
        )


def grid_progress(jobs: list[Job], shots_dir: Path) -> GridProgress:
    """The run's progress from its grid and the finished series' journals in `shots_dir`."""
    done_seconds, done_shots, done, shots_left = 0.0, 0, 0, 0
    for job in jobs:
        finished = shots_dir / f"{job.job_id}.jsonl"
        if not finished.exists():
            shots_left += job.series_length
            continue
        done += 1
        seconds, shots = _series_time(finished)
        done_seconds, done_shots = done_seconds + seconds, done_shots + shots
    per_shot = done_seconds / done_shots if done_shots and done_seconds > 0 else None
    return GridProgress(done, len(jobs), shots_left, per_shot)


def _series_time(journal: Path) -> tuple[float, int]:
    """(seconds from the first shot's start to the last shot's end, shots) of a finished series."""
    rows = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    timed = [r for r in rows if r.get("wall_start_utc") and r.get("e2e_s") is not None]
    if not timed:
        return 0.0, 0
    starts = [datetime.fromisoformat(r["wall_start_utc"]).timestamp() for r in timed]
    first_ready_s = timed[0].get("process_ready_s") or 0.0
    span_s = max(s + r["e2e_s"] for s, r in zip(starts, timed, strict=True)) - min(starts) + first_ready_s
    return span_s, len(timed)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
