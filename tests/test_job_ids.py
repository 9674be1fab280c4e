"""Job ids are part of the data: they name the shot files (results/shots/<id>.jsonl), and a rerun
resumes the series whose files exist. Every shipped config, and a grid that sets every axis of an
id away from its default, must give the ids it gave when these files were written (from the
commit before Job took keywords, issue 34). Regenerate only to break resuming on purpose:
`python tests/test_job_ids.py`."""

import dataclasses
import sys
from pathlib import Path

import pytest

from whichshot.config import config_as_run
from whichshot.measure.grid import Job, all_jobs, job_by_id
from whichshot.shots.axes import AXES

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "job_ids"
CONFIGS = sorted((ROOT / "config").glob("*.yaml")) + [FIXTURES / "every_axis.yaml"]


def config_of(path: Path) -> dict:
    return config_as_run(path, ROOT / "config" / "config.yaml")


def job_ids(path: Path) -> list[str]:
    return [job.job_id for job in all_jobs(config_of(path))]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_job_ids_stay_as_they_were(path, monkeypatch):
    monkeypatch.chdir(ROOT)  # trace paths are relative to the project
    assert job_ids(path) == (FIXTURES / f"{path.stem}.txt").read_text().splitlines()


def test_every_id_names_its_job(monkeypatch):
    monkeypatch.chdir(ROOT)
    config = config_of(FIXTURES / "every_axis.yaml")
    jobs = all_jobs(config)
    assert len({job.job_id for job in jobs}) == len(jobs)
    for job in jobs[:: max(1, len(jobs) // 40)]:
        assert job_by_id(config, job.job_id) == job


def test_a_jobs_fields_are_the_shots_axis_columns():
    """The shot records copy a job's axes by name (measure/protocol.py)."""
    assert [field.name for field in dataclasses.fields(Job)] == [*AXES, "repeat", "series_length"]


if __name__ == "__main__":
    import os

    os.chdir(ROOT)
    for path in CONFIGS:
        (FIXTURES / f"{path.stem}.txt").write_text("".join(f"{i}\n" for i in job_ids(path)))
        print(path.name, file=sys.stderr)
