"""The grid's duration stated before it runs (issue 32): per series its rests and warm-up seconds
exactly as the config asks, start-ups and shots at earlier speeds or a stated default."""

import base64
import itertools
import json

import pytest

from tests import pipeline
from tests.shot_tables import cell, series, table
from whichshot.estimate import load_config, main
from whichshot.measure.estimate import (
    DEFAULT_SHOTS,
    DEFAULT_SPEEDS,
    estimate_series,
    estimate_words,
    still_finished,
    summary_lines,
)


def expected_rests(config: dict) -> tuple[int, float, float]:
    """(rests, rest seconds, warm-up seconds) of the protocol grid, counted from its axes alone."""
    p = config["protocol"]
    other_axes = (len(config["engines"]) * len(p["models"]) * len(config["prompts"]["lengths"])
                  * len(p["context_tokens"]) * len(p["orders"]) * len(p["engine_warmup"])
                  * len(p["prefill_chunk_tokens"]) * len(p["parallel_streams"]) * p["repeats"])  # fmt: skip
    rests = rest_s = warmup_s = 0.0
    for rest, pre in itertools.product(p["rests_s"], p["precondition_s"]):
        gaps = p["warm_shots"] - 1 if rest > 0 else 0
        rests += other_axes * gaps
        rest_s += other_axes * gaps * rest
        warmup_s += other_axes * pre
    return int(rests), rest_s, warmup_s


@pytest.mark.parametrize("path", ["config/config.yaml", "config/full.yaml"])
def test_every_series_is_estimated_and_the_rests_are_counted_exactly(path):
    config = load_config(path)
    estimates = estimate_series(config)
    grid = [e for e in estimates if e.job.workload == "continue_text"]
    rests, rest_s, warmup_s = expected_rests(config)
    assert sum(e.rests for e in grid) == rests
    assert sum(e.rest_s for e in estimates) == pytest.approx(rest_s)  # workloads rest 0 s
    assert sum(e.precondition_s for e in grid) == pytest.approx(warmup_s)
    assert all(e.shots_s > 0 and e.startup_s > 0 and e.total_s > 0 for e in estimates)
    cold = [e for e in estimates if e.job.protocol == "cold"]
    assert all(e.processes == e.job.series_length for e in cold)  # a fresh process per cold shot
    assert all(e.speeds is DEFAULT_SPEEDS["llama_cpp"] for e in estimates)  # no earlier results given


def test_the_full_grid_states_its_hours():
    config = load_config("config/full.yaml")
    (head, *_rest) = summary_lines(config, estimate_series(config))
    assert head.startswith("full-cpu: 372 series, about 14 h")  # defaults; rests alone are 6 h 18 min
    assert "rests 6 h 18 min" in head and "1080 rests" in head and "warm-up before timing 1 h 12 min" in head


def test_speeds_come_from_earlier_shots_where_they_have_the_engine_and_model():
    config = load_config("config/config.yaml")
    earlier = table(
        series(
            cell(engine="llama_cpp", model="smollm2_135m"),
            [{"decode_tok_s": 64.0, "prefill_tok_s": 500.0, "process_ready_s": 0.5}] * 3,
        )  # fmt: skip
    )
    estimates = estimate_series(config, earlier)
    grid = [e for e in estimates if e.job.model == "smollm2_135m"]
    assert grid and all(e.speeds.source == "earlier shots.parquet" for e in grid)
    one = grid[0]
    shot_s = one.job.prompt_tokens_requested / 500.0 + config["protocol"]["output_tokens"] / 64.0
    assert one.shots_s == pytest.approx(one.job.series_length * shot_s)
    assert one.startup_s == pytest.approx(one.processes * 0.5)
    others = [e for e in estimates if e.job.model != "smollm2_135m"]
    assert others and all(e.speeds is DEFAULT_SPEEDS["llama_cpp"] for e in others)


def test_the_command_prints_one_estimate_per_config(capsys, tmp_path):
    assert main(["--configfile", "config/config.yaml", "--configfile", "config/full.yaml",
                 "--shots", str(tmp_path / "none.parquet")]) == 0  # fmt: skip
    printed = capsys.readouterr().out.splitlines()
    heads = [line for line in printed if not line.startswith(" ")]
    assert [h.split(":")[0] for h in heads] == ["default-cpu", "full-cpu"]
    minutes = int(heads[0].split("about ")[1].split(" min")[0])
    assert 0 < minutes < 60


def test_a_dry_run_of_the_workflow_prints_the_estimate_and_a_listing_does_not(tmp_path):
    given = pipeline.load_config("smoke")
    config = pipeline.filled_config("smoke")
    dry = pipeline.run_pipeline(tmp_path, given, "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    (told,) = [line for line in dry.stderr.splitlines() if line.startswith("Estimated duration: ")]
    head = summary_lines(config, estimate_series(config))[0]  # no earlier results in tmp_path
    assert told == f"Estimated duration: {head}"
    assert "not counted: model downloads" in dry.stderr
    listing = pipeline.run_pipeline(tmp_path, given, "--list-rules")  # parses the workflow, runs nothing
    assert listing.returncode == 0 and "Estimated duration" not in listing.stderr + listing.stdout


ON_DISK = "series have their shots on disk, measured as now planned (results/shots/)"


def test_series_whose_shots_are_on_disk_are_not_estimated():
    config = load_config("config/config.yaml")
    jobs = [e.job.job_id for e in estimate_series(config)]
    half = frozenset(jobs[: len(jobs) // 2])
    head, *_parts, last = estimate_words(config, DEFAULT_SHOTS.with_name("none.parquet"), half).splitlines()
    assert head.startswith(f"default-cpu: {len(jobs) - len(half)} series, about ")
    assert last.startswith(f"  not counted: {len(half)} {ON_DISK}, ")
    everything = estimate_words(config, DEFAULT_SHOTS.with_name("none.parquet"), frozenset(jobs))
    assert everything == f"default-cpu: nothing to measure: all {len(jobs)} {ON_DISK}"


def test_a_dry_run_with_every_series_measured_says_there_is_nothing_to_measure(tmp_path):
    given = pipeline.load_config("smoke")
    config = pipeline.filled_config("smoke")
    shots = tmp_path / "results" / "shots"
    shots.mkdir(parents=True)
    jobs = [e.job.job_id for e in estimate_series(config)]
    for job in jobs[1:]:
        (shots / f"{job}.jsonl").write_text("")
    dry = pipeline.run_pipeline(tmp_path, given, "--dry-run")
    (told,) = [line for line in dry.stderr.splitlines() if line.startswith("Estimated duration: ")]
    assert told.startswith("Estimated duration: smoke: 1 series, about ")
    (shots / f"{jobs[0]}.jsonl").write_text("")
    dry = pipeline.run_pipeline(tmp_path, given, "--dry-run")
    (told,) = [line for line in dry.stderr.splitlines() if line.startswith("Estimated duration: ")]
    assert told == f"Estimated duration: smoke: nothing to measure: all {len(jobs)} {ON_DISK}"


def test_a_series_whose_plan_changed_since_its_shots_is_not_finished(tmp_path):
    """As Snakemake judges it: the shots on disk, and its record of run_series's params is this plan
    (no record: Snakemake reruns nothing for params, so the series stays finished)."""
    shots = tmp_path / "results" / "shots" / "j.jsonl"
    metadata = tmp_path / "metadata"
    plan = {"job": {"job_id": "j"}, "bench": {"repetitions": 3}}
    assert not still_finished(shots, plan, metadata)
    shots.parent.mkdir(parents=True)
    shots.write_text("{}\n")
    assert still_finished(shots, plan, metadata)
    metadata.mkdir()
    record = metadata / base64.urlsafe_b64encode(str(shots).encode()).decode()
    record.write_text(json.dumps({"rule": "run_series", "params": json.dumps([repr(plan)])}))
    assert still_finished(shots, plan, metadata)
    assert not still_finished(shots, {**plan, "bench": {"repetitions": 5}}, metadata)


@pytest.mark.parametrize("limit", [0, 1, 2])
def test_the_re_run_of_busy_processes_is_stated_as_a_maximum(limit):
    config = load_config("config/config.yaml")
    config["protocol"]["replace_busy"] = limit
    estimates = estimate_series(config)
    for e in estimates:
        assert e.replace_processes == limit
        # a cold process is one start and one shot; a warm series' process is the whole series
        one = e.startup_s / e.processes + e.shots_s / e.job.series_length
        expected = e.total_s if e.job.protocol == "warm" else one
        assert e.replace_s == pytest.approx(limit * expected)
    words = "\n".join(summary_lines(config, estimates))
    if limit:
        assert f"at most {limit * len(estimates)} more processes" in words
        assert f"protocol.replace_busy: {limit} per series" in words
    else:
        assert "busy processes are not re-run (protocol.replace_busy: 0)" in words
