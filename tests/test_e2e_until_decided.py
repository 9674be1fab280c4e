"""Run until decided on the real engine (protocol.until_decided, looks [2, 3]): the first look's series
and its decision run; the run, started again, resumes the sequence from the decision on disk (look
1's series are not measured again) and adds look 2's series only where that decision said
"continue"; the report's paired verdicts carry the looks' level, the archive the decisions."""

import json
import tarfile

import pandas as pd
import pytest

from tests.pipeline import load_config, run_pipeline
from whichshot.config import with_defaults
from whichshot.figures.look_decision import look_level
from whichshot.measure.grid import all_jobs
from whichshot.measure.order import run_order

pytestmark = pytest.mark.e2e

LOOKS = [2, 3]


def _config() -> dict:
    config = load_config("smoke")
    config["run_id"] = "until-decided"
    config["prompts"]["lengths"] = [64]
    config["protocol"] |= {"output_tokens": 8, "cold_processes": 0, "warm_shots": 3,
                           "until_decided": {"enabled": True, "looks": LOOKS}}  # fmt: skip
    config["bench"] = {"enabled": False}
    return config


def test_the_looks_run_in_sequence_and_resume_from_the_decision_on_disk(tmp_path):
    config = _config()
    jobs = all_jobs(with_defaults(config))
    (cell,) = {place.cell for place in run_order(jobs).values()}
    look1 = tmp_path / "results" / "looks" / cell / "look1.json"
    shots = {job.repeat: tmp_path / "results" / "shots" / f"{job.job_id}.jsonl" for job in jobs}

    first = run_pipeline(tmp_path, config, f"results/looks/{cell}/look1.json")
    assert first.returncode == 0, first.stderr[-4000:]
    decided = json.loads(look1.read_text())
    assert decided["level"] == pytest.approx(look_level(2)) and decided["series"] == 2
    assert set(decided["verdicts"][jobs[0].series_label]) == {"prefill_tok_s", "decode_tok_s"}
    assert shots[1].exists() and shots[2].exists() and not shots[3].exists()
    measured = {repeat: shots[repeat].stat().st_mtime_ns for repeat in (1, 2)}

    resumed = run_pipeline(tmp_path, config)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert {repeat: shots[repeat].stat().st_mtime_ns for repeat in (1, 2)} == measured
    assert json.loads(look1.read_text()) == decided  # the decision on disk was read, not made again
    look2 = look1.with_name("look2.json")
    rows = pd.read_parquet(tmp_path / "results" / "shots.parquet")
    if decided["decision"] == "continue":
        assert shots[3].exists() and json.loads(look2.read_text())["decision"] in ("decided", "last look")
        assert set(rows["repeat"]) == {1, 2, 3}
    else:
        assert not shots[3].exists() and not look2.exists()
        assert set(rows["repeat"]) == {1, 2}
    with tarfile.open(tmp_path / "results" / "archive" / "until-decided.tar.gz") as archive:
        assert any(name.endswith(f"results/looks/{cell}/look1.json") for name in archive.getnames())
    figures = pd.read_parquet(tmp_path / "results" / "figures.parquet")
    paired = figures["parameters"].str.contains('"paired"')
    intervals = figures[figures["metric"].str.endswith("_low") & paired]
    assert len(intervals) and intervals["parameters"].str.contains(f'"level": {look_level(2)}').all()
