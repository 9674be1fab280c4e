"""Progress a person can read (issue 20): series done of the grid, shot k of n, and the time left
estimated from the seconds per shot of the series already finished."""

import json

from tests.test_grid import _config
from whichshot.measure.grid import expand_jobs
from whichshot.measure.progress import grid_progress


def _finish(shots_dir, job, seconds_between_shots: float, e2e_s: float, ready_s: float) -> None:
    rows = [{"wall_start_utc": f"2026-12-03T10:00:{int(i * seconds_between_shots):02d}+00:00",
             "e2e_s": e2e_s, "process_ready_s": ready_s} for i in range(job.series_length)]  # fmt: skip
    (shots_dir / f"{job.job_id}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_estimate_uses_the_finished_series_seconds_per_shot(tmp_path):
    jobs = expand_jobs(_config(repeats=1, warm_shots=4, cold_processes=2))
    total_shots = sum(j.series_length for j in jobs)
    assert (
        grid_progress(jobs, tmp_path)
        .line(jobs[0].job_id, 1, jobs[0].series_length)
        .endswith(f"({total_shots} shots to go)")
    )  # nothing finished: no estimate
    warm = next(j for j in jobs if j.protocol == "warm")
    _finish(tmp_path, warm, seconds_between_shots=2, e2e_s=1.0, ready_s=3.0)  # 4 shots in 6 + 1 + 3 s
    progress = grid_progress(jobs, tmp_path)
    assert (progress.series_done, progress.series_total) == (1, len(jobs))
    assert progress.seconds_per_shot == 10.0 / 4
    assert progress.shots_left == total_shots - 4
    cold = next(j for j in jobs if j.protocol == "cold")
    line = progress.line(cold.job_id, 2, cold.series_length)
    left = total_shots - 4 - 1
    assert f"1 of {len(jobs)} series done; measuring {cold.job_id}: shot 2 of 2" in line
    assert f"about {left * 2.5:.0f} s left, {left} shots to go" in line  # under 90 s: in seconds
