"""Run until decided (protocol.until_decided), without an engine: the looks' plan (measure.looks), the
decision after a look from a cell's shots (figures.look_decision), the seeded simulation of the whole
sequential design at the noise measured on the 2-core VM (figures.verdict_sim.sequential_rates), and
Snakemake's plan of a fresh run (a dry run: only look 1's series and decision)."""

import copy
import json

import numpy as np
import pytest

from tests.pipeline import load_config, run_pipeline
from whichshot.config import check_config, config_as_run, with_defaults
from whichshot.errors import WhichshotError
from whichshot.figures.look_decision import (
    DECIDED,
    LAST_LOOK,
    SECONDS_CAP,
    decide_look,
    decision,
    look_level,
    measured_seconds,
    verdict_level,
)
from whichshot.figures.verdict import DIFFERS_CODE, LEVEL, SAME_CODE, UNDECIDED_CODE
from whichshot.figures.verdict_sim import fixture_spreads, sequential_rates
from whichshot.measure.grid import all_jobs
from whichshot.measure.looks import CONTINUE, Looks, cells_in_looks, looks_of, looks_run, series_through
from whichshot.measure.order import run_order
from whichshot.shots.axes import BASE_WORKLOAD

MARGIN = 0.02


def _verdicts(*codes):
    return {"series": {f"phase{i}": {"code": code} for i, code in enumerate(codes)}}


def test_every_look_is_at_the_bonferroni_level_of_the_planned_looks():
    assert look_level(1) == pytest.approx(LEVEL)
    assert look_level(3) == pytest.approx(1 - (1 - LEVEL) / 3)
    looks = Looks((10, 20, 40))
    assert [looks.bounds(k) for k in (1, 2, 3)] == [(1, 10), (11, 20), (21, 40)]
    assert [looks.look_of(r) for r in (1, 10, 11, 40)] == [1, 1, 2, 3]
    protocol = {"until_decided": {"enabled": True, "looks": [10, 20, 40]}}
    assert verdict_level(protocol) == pytest.approx(1 - 0.05 / 3)
    assert verdict_level({"until_decided": {"enabled": False, "looks": [10, 20, 40]}}) == LEVEL


def test_a_cell_stops_once_every_verdict_decides_else_at_the_last_look_or_the_seconds_cap():
    looks = Looks((10, 20, 40), max_seconds=600.0)
    assert decision(_verdicts(DIFFERS_CODE, SAME_CODE), 1, looks, 10.0) == DECIDED
    assert decision(_verdicts(DIFFERS_CODE, UNDECIDED_CODE), 1, looks, 10.0) == CONTINUE
    assert decision(_verdicts(DIFFERS_CODE, None), 2, looks, 10.0) == CONTINUE  # too few: not decided
    assert decision(_verdicts(DIFFERS_CODE, UNDECIDED_CODE), 3, looks, 10.0) == LAST_LOOK
    assert decision(_verdicts(UNDECIDED_CODE), 2, looks, 600.0) == SECONDS_CAP
    assert decision({}, 1, looks, 0.0) == CONTINUE  # no verdict at all decides nothing


def test_the_next_look_is_asked_for_only_after_a_continue():
    looks = Looks((2, 3, 5))
    asked = []

    def pending_after(decisions):
        def decision_of(look):
            asked.append(look)
            return decisions.get(look)  # None: its checkpoint has not run

        return decision_of

    assert looks_run(looks, pending_after({})) == 1
    assert looks_run(looks, pending_after({1: CONTINUE})) == 2
    assert looks_run(looks, pending_after({1: DECIDED, 2: CONTINUE})) == 1
    assert looks_run(looks, pending_after({1: CONTINUE, 2: CONTINUE})) == 3
    assert looks_run(looks, pending_after({1: CONTINUE, 2: SECONDS_CAP})) == 2
    assert max(asked) == 2  # the last look's decision is never needed to plan more


def _records(cell_label, first_prefill, warm_prefill, first_decode, warm_decode):
    """One warm series per process: shot 1 and two warm shots, at the given speeds."""
    rows = []
    for p, (fp, wp, fd, wd) in enumerate(
        zip(first_prefill, warm_prefill, first_decode, warm_decode, strict=True)
    ):
        for index in (1, 2, 3):
            first = index == 1
            rows.append({"job_id": f"{cell_label}.rep{p + 1}", "series_label": cell_label, "protocol": "warm",
                         "process_id": f"p{p}", "shot_index": index, "series_position": index, "status": "ok",
                         "prefill_tok_s": fp if first else wp, "decode_tok_s": fd if first else wd,
                         "t_request_mono_s": 100.0 * p + index, "t_end_mono_s": 100.0 * p + index + 0.5,
                         "process_ready_s": 2.0})  # fmt: skip
    return rows


def _write(tmp_path, rows):
    path = tmp_path / "shots.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return [path]


def test_a_look_decides_from_the_cells_shots_at_the_looks_level(tmp_path):
    rng = np.random.default_rng(3)
    n = 10
    warm = 500 * np.exp(rng.normal(0, 0.003, n))
    # Shot 1's prefill half the warm speed; decode the same within a fraction of the margin.
    rows = _records("cell", warm * 0.5, warm, warm * np.exp(rng.normal(0, 0.002, n)), warm)
    made = decide_look(_write(tmp_path, rows), 1, Looks((10, 20)), 0.7, MARGIN)
    verdicts = made["verdicts"]["cell"]
    assert verdicts["prefill_tok_s"]["verdict"] == "differs"
    assert verdicts["prefill_tok_s"]["high"] == pytest.approx(-0.5, abs=0.01)
    assert verdicts["decode_tok_s"]["verdict"].startswith("same within")
    assert made["decision"] == DECIDED and made["level"] == pytest.approx(0.975)
    assert made["seconds"] == pytest.approx(n * (2.5 + 2.0))  # per process: ready + first request to end

    noisy = _records("cell", warm * 0.5, warm, warm * np.exp(rng.normal(0, 0.3, n)), warm)
    made = decide_look(_write(tmp_path, noisy), 1, Looks((10, 20)), 0.7, MARGIN)
    assert made["verdicts"]["cell"]["decode_tok_s"]["verdict"] == "undecided"
    assert made["decision"] == CONTINUE


def test_a_replaced_process_counts_in_the_seconds_not_in_the_verdict():
    rows = _records("cell", [1.0, 1.0], [2.0, 2.0], [1.0, 1.0], [1.0, 1.0])
    replaced = [{**row, "process_id": "gone", "status": "replaced"} for row in rows[:3]]
    assert measured_seconds(rows + replaced) == pytest.approx(measured_seconds(rows) + 2.5 + 2.0)


def _default_in_looks(looks):
    config = config_as_run("config/config.yaml")
    config["protocol"]["until_decided"] = {"enabled": True, "looks": looks, "max_seconds": None}
    return config


def test_each_look_runs_whole_interleaved_blocks_of_every_side_of_its_cell():
    config = _default_in_looks([3, 5])
    config["protocol"]["rests_s"] = [0, 3]  # two warm sides a cell
    jobs = all_jobs(config)
    order = run_order(jobs)
    cells = cells_in_looks(jobs, {job_id: place.cell for job_id, place in order.items()}, config["protocol"])
    grid = [job for job in jobs if job.workload == BASE_WORKLOAD]
    assert len(cells) == len(config["prompts"]["lengths"]) and max(job.repeat for job in grid) == 5
    looks = looks_of(config["protocol"])
    for cell_jobs in cells.values():
        first = series_through(cell_jobs, looks, 1)
        assert len(first) == 2 * 3 and len(series_through(cell_jobs, looks, 2)) == 2 * 5
        places = sorted(order[job_id].position for job_id in first)
        assert places == list(range(places[0], places[0] + len(first)))  # the cell's first blocks
        slots = [order[job_id].slot for job_id in sorted(first, key=lambda j: order[j].position)]
        assert slots == [1, 2, 1, 2, 1, 2]  # sides alternate (ABBA) inside the look
    workloads = [job for job in jobs if job.workload != BASE_WORKLOAD]
    assert max(job.repeat for job in workloads) == config["workloads"]["repeats"]  # not in looks


def test_looks_must_increase():
    config = with_defaults(load_config("smoke"))
    config["protocol"]["until_decided"] = {"enabled": True, "looks": [4, 4]}
    with pytest.raises(WhichshotError, match="must increase"):
        check_config(config)


@pytest.fixture(scope="module")
def measured():
    spreads = fixture_spreads()["paired"]
    return {phase: spreads[phase][0] for phase in spreads}  # normal tails: the harder case for power


@pytest.mark.parametrize("looks", [(10, 20, 40), (10, 30), (12, 24, 36)])
@pytest.mark.parametrize("effect", [0.0, MARGIN, -MARGIN])
def test_over_all_looks_false_differs_stays_at_most_5_percent(measured, looks, effect):
    rates = sequential_rates(looks, 3, measured, dict.fromkeys(measured, effect), MARGIN, 4000, seed=41)
    assert all(rate.differs <= 0.05 for rate in rates.values())


def test_without_the_correction_repeated_looks_would_say_differs_more_often(measured):
    """The Bonferroni level is what holds the rate: the same looks, each at 95 %, say differs of a
    difference as large as the margin more often than the corrected ones."""
    effects = dict.fromkeys(measured, MARGIN)
    corrected = sequential_rates((10, 20, 40), 3, measured, effects, MARGIN, 4000, seed=5)
    single = sequential_rates((40,), 3, measured, effects, MARGIN, 4000, seed=5)
    assert corrected["decode_tok_s"].differs < single["decode_tok_s"].differs


def test_where_ten_series_fall_short_looks_10_20_40_find_a_10_percent_decode_difference():
    """At the fixture's classical spread (every wild process counted in full: the noisier reading),
    ten series alone find a 10 % decode difference less than 80 % of the time; the looks do, and most
    cells stop before the last look."""
    noisy = fixture_spreads()["paired_classical"]
    effects = dict.fromkeys(noisy, -0.10)
    rates = sequential_rates((10, 20, 40), 3, noisy, effects, MARGIN, 4000, seed=47)
    assert rates["prefill_tok_s"].differs >= 0.99 and rates["decode_tok_s"].differs >= 0.80
    assert 10 < rates["decode_tok_s"].mean_series < 40
    fixed = sequential_rates((10,), 3, noisy, effects, MARGIN, 4000, seed=47)
    assert fixed["decode_tok_s"].differs < 0.80


def test_a_fresh_run_plans_only_the_first_looks_series_and_decision(tmp_path):
    config = copy.deepcopy(load_config("smoke"))
    config["protocol"]["until_decided"] = {"enabled": True, "looks": [2, 3]}
    dry = run_pipeline(tmp_path, config, "--dry-run")
    assert dry.returncode == 0, dry.stderr[-3000:]
    series = {line.split("results/shots/")[1].split(".jsonl")[0] for line in dry.stdout.splitlines()
              if "output: results/shots/" in line}  # fmt: skip
    grid = [job for job in all_jobs(with_defaults(config)) if job.workload == BASE_WORKLOAD]
    assert series == {job.job_id for job in grid if job.repeat <= 2}
    assert {job.repeat for job in grid} == {1, 2, 3}
    looks = [line for line in dry.stdout.splitlines() if "output: results/looks/" in line]
    assert len(looks) == 2 and all(line.endswith("/look1.json") for line in looks)  # one per cell
    assert "the most, every look: 12 grid series" in dry.stderr
