"""One finished small pipeline run shared by the report and archive tests (run once per session)."""

import os
from pathlib import Path

from tests.pipeline import load_config, run_pipeline

# Planted in the pipeline's environment: the archive must keep the first and drop the second.
KEPT_VARIABLE = ("WHICHSHOT_TEST_MARKER", "kept-in-archive")
SECRET_VARIABLE = ("WHICHSHOT_TEST_API_TOKEN", "hunter2-do-not-archive")


def finished_report_run(tmp_path_factory) -> Path:
    """The workdir of a finished run of tests/configs/report.yaml (cold/warm grid, llama-bench, and
    verbatim_recall on real and synthetic text with and without n-gram drafting, cold and warm)."""
    workdir = tmp_path_factory.getbasetemp() / "report_run"
    finished = workdir / "finished"
    if not finished.exists():
        workdir.mkdir(exist_ok=True)
        env = {**os.environ, KEPT_VARIABLE[0]: KEPT_VARIABLE[1], SECRET_VARIABLE[0]: SECRET_VARIABLE[1]}
        result = run_pipeline(workdir, load_config("report"), env=env)
        assert result.returncode == 0, result.stderr[-4000:]
        finished.touch()
    return workdir
