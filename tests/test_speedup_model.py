"""The speculative-decoding cost model: a drafted cell's speed-up predicted from its counts and the
cost of a verification step on this machine, set against the measured one. The kernel-only model of
runs before the server's verify probe (llama-bench's t(k+1)/t(1); their committed figures recompute
with it) here; the server-step model in test_verify_probe.py, and both through the pipeline below."""

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.pipeline import load_config, run_pipeline
from tests.probe_records import probe_record
from whichshot.figures.aggregations import compute, recompute
from whichshot.figures.constants import VERIFY_PROBE_SPREAD_LIMIT
from whichshot.figures.speedup_model_figures import (
    ACCEPTED_SHARE,
    DRAFTER_SHARE,
    KERNEL_SHARE,
    PLAIN_STEP_MS,
    PREDICTED_SPEEDUP,
    PREDICTION_RESIDUAL,
    PROBE_SPREAD,
    VERIFY_COST,
)
from whichshot.figures.table import write_figures_from_files

# results/reference/cpu_first_run's warm edit_file shot (real text, ngram-simple, cap 16): 217 output
# tokens, 256 drafted, 194 accepted, llama-server's mean len 13.12 -> 194 / 12.12 = 16 verify steps.
EDIT = {"output_tokens": 217, "engine_draft_tokens": 256, "engine_draft_accepted": 194,
        "engine_draft_mean_len": 13.12, "server_spec_drafts_delta": None}  # fmt: skip
COLUMNS = list(EDIT)
REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference"


def _predicted(rows: list[dict], ratio_at_cap: float | None, cap: int = 16) -> float | None:
    return compute("speculative_speedup", pd.DataFrame(rows), COLUMNS, {"cap": cap}, [ratio_at_cap])


def test_the_prediction_counts_plain_and_verify_steps():
    # 216 decoded tokens: 16 verify steps emit 194 + 16, the other 6 tokens are plain steps.
    assert _predicted([EDIT], 4.7) == pytest.approx(216 / (6 + 16 * 4.7))


def test_the_same_acceptance_gains_more_where_a_wide_batch_costs_less():
    """Why one CPU shows x3.3 and another x1.6 on the same counts: the verify cost."""
    cheap, dear = _predicted([EDIT], 2.0), _predicted([EDIT], 8.0)
    assert cheap == pytest.approx(216 / (6 + 32)) and dear == pytest.approx(216 / (6 + 128))
    assert cheap / dear > 3


def test_a_shorter_mean_draft_costs_less_than_the_caps_batch():
    """ngram-mod drafts up to its cap but often fewer: t(k+1)/t(1) is taken at the mean k."""
    half = {**EDIT, "engine_draft_tokens": 128}  # 16 steps of 8 drafts: r = 1 + 3.7 x 8/16
    assert _predicted([half], 4.7) == pytest.approx(216 / (6 + 16 * (1 + 3.7 * 0.5)))


def test_verify_steps_come_from_the_servers_counter_where_the_log_gave_no_mean_length():
    counted = {**EDIT, "engine_draft_mean_len": None, "server_spec_drafts_delta": 16}
    assert _predicted([counted], 4.7) == _predicted([EDIT], 4.7)
    unknown = {**EDIT, "engine_draft_mean_len": None}
    assert _predicted([unknown], 4.7) is None  # no step count: no prediction, never a guess
    assert _predicted([EDIT], None) is None


def test_a_shot_that_drafted_nothing_is_all_plain_steps():
    none_drafted = {
        **EDIT,
        "engine_draft_tokens": 0,
        "engine_draft_accepted": 0,
        "engine_draft_mean_len": None,
    }
    assert _predicted([none_drafted], 4.7) == pytest.approx(1.0)


def test_where_a_shot_ran_beside_foreign_work_the_residual_carries_it_and_no_second_residual(tmp_path):
    """cpu_cost_model's shots with one no-draft shot of recall marked busy, each drafted series given
    a hand-made server probe (the run predates it): that cell's residual carries host_busy; no
    residual is computed again without the busy shot (shots picked after seeing them, issue 49)."""
    run = REFERENCE / "cpu_cost_model"
    shots = pd.read_parquet(run / "shots.parquet")
    busy = shots.index[
        shots["job_id"].str.contains("verbatim_recall-real.warm") & (shots["spec_mode"] == "none")
    ][-1]
    shots.loc[busy, "host_foreign_cores"] = 1.5  # beyond 0.1 cores on 2 cores with 2 engine threads
    shots.to_parquet(tmp_path / "shots.parquet")
    out = (tmp_path / "figures.parquet", tmp_path / "caveats.parquet")
    (tmp_path / "bench").mkdir()
    for path in run.glob("bench/*.json"):
        record = json.loads(path.read_text())
        if record["verify_cost"].get("not_run") is None:  # a drafted series
            record["verify_probe"] = probe_record(17, [10.0], [20.0], [60.0])
        (tmp_path / "bench" / path.name).write_text(json.dumps(record))
    write_figures_from_files(tmp_path / "shots.parquet", sorted(tmp_path.glob("bench/*.json")), 0.7, *out)
    figures = pd.read_parquet(out[0])
    assert figures["metric"].eq(PREDICTED_SPEEDUP).sum() == 6  # every drafted cell is modelled
    assert not [m for m in figures["metric"] if m.endswith("_quiet")]
    residuals = figures[figures["metric"] == PREDICTION_RESIDUAL]
    busy_cells = {row.workload for row in residuals.itertuples() if "host_busy" in row.caveat_ids}
    assert busy_cells == {"verbatim_recall"}


def test_the_verify_cost_is_the_wide_batchs_seconds_over_one_tokens():
    params = {"width": 17, "samples_one_tok_s": [25.0, 27.0], "samples_wide_tok_s": [100.0, 104.0]}
    assert compute("verify_cost_ratio", None, [], params) == pytest.approx(17 * 26.0 / 102.0)


@pytest.mark.e2e
def test_a_drafted_series_is_followed_by_its_verify_probes_and_gets_a_prediction(tmp_path):
    """The real engine, llama-bench and the server's verify probe: the drafted series' bench record
    holds llama-bench's pp1 and pp17 at its depth with every token out, and the server's step readings
    at width 17 with every draft accepted and none; the cell's prediction, step shares and residual
    recompute from what they cite, and the step ratios from the probe's samples."""
    config = load_config("workloads")
    config["workloads"].update(names=["verbatim_recall"], text_kinds=["real"], document_tokens=192,
                               max_output_tokens=240, warm_shots=2)  # fmt: skip
    config["protocol"]["models"] = []
    # The engine-kernel probe times only the prefill ceiling's peak, which no test here reads.
    config["bench"] = {"enabled": True, "repetitions": 2, "verify_probe": {"repetitions": 2, "steps": 4},
                       "kernel_probe": {"enabled": False}}  # fmt: skip
    result = run_pipeline(tmp_path, config, "results/report/index.html")
    assert result.returncode == 0, result.stderr[-4000:]
    records = {p.name: json.loads(p.read_text()) for p in (tmp_path / "results" / "bench").glob("*.json")}
    drafted = [r for name, r in records.items() if ".ngram_simple." in name]
    undrafted = [r for name, r in records.items() if ".none." in name]
    assert drafted  # the cold process's series and the warm series
    for record in drafted:
        probe = record["verify_cost"]
        assert probe["widths"] == [1, 17] and "-embd" in probe["argv"]
        depth = probe["depth_tokens"]
        assert {(row["n_prompt"], row["n_depth"]) for row in probe["rows"]} == {(1, depth), (17, depth)}
        steps = record["verify_probe"]
        assert steps["error"] is None and steps["depth_tokens"] == depth and steps["widths"] == [17]
        assert [(p["server"], p["width"]) for p in steps["points"]] == [
            ("accept_none", 2),
            ("accept_none", 17),
            ("accept_all", 17),
            ("series_drafter", 2),  # the series' own drafter's plain step (issue 53)
        ]
    assert undrafted and all(
        r["verify_cost"]["not_run"] == r["verify_probe"]["not_run"] == "the series drafts nothing"
        for r in undrafted
    )

    figures = pd.read_parquet(tmp_path / "results" / "figures.parquet")
    shots = pd.read_parquet(tmp_path / "results" / "shots.parquet").set_index("shot_id", drop=False)
    metrics = [VERIFY_COST, PLAIN_STEP_MS, PROBE_SPREAD, "verify_step_ratio_none_accepted_w17",
               "verify_step_ratio_all_accepted_w17", PREDICTED_SPEEDUP, KERNEL_SHARE, ACCEPTED_SHARE,
               PREDICTION_RESIDUAL]  # fmt: skip
    model = figures[figures["metric"].isin(metrics)]
    assert set(model["metric"]) == set(metrics)
    kinds = dict(zip(model["metric"], model["kind"], strict=True))
    assert {kinds[m] for m in (PREDICTED_SPEEDUP, KERNEL_SHARE, ACCEPTED_SHARE, PREDICTION_RESIDUAL)} == {
        "inferred"
    }
    assert {kinds[m] for m in metrics[:5]} == {"derived"}
    values = dict(zip(figures["figure_id"], figures["value"], strict=True))
    caveats = set(pd.read_parquet(tmp_path / "results" / "caveats.parquet")["caveat_id"])
    for _cell, cell_model in model.groupby("cell_id"):  # the cold and the warm cell
        by_metric = cell_model.set_index("metric")["value"]
        # a machine too busy to time the probe: said, not used
        if by_metric[PROBE_SPREAD] > VERIFY_PROBE_SPREAD_LIMIT:
            assert by_metric[[PREDICTED_SPEEDUP, KERNEL_SHARE, ACCEPTED_SHARE]].isna().all()
            assert "verify_probe_unsteady" in caveats
        else:  # the step's parts: the forward pass, the accepted tokens and the drafter's own step
            shares = figures[(figures["cell_id"] == _cell) & (figures["metric"] == DRAFTER_SHARE)]["value"]
            drafter = float(shares.iloc[0]) if len(shares) else 0.0
            assert by_metric[KERNEL_SHARE] + by_metric[ACCEPTED_SHARE] + drafter == pytest.approx(1.0)
    model = model[model["value"].notna()]
    for row in model.to_dict("records"):
        assert row["value"] is not None and recompute(row, shots, values) == pytest.approx(row["value"])
    summary = (tmp_path / "results" / "report" / "summary.md").read_text()
    assert "## Why drafting gains this much here" in summary and "per-token share" in summary
    html = (tmp_path / "results" / "report" / "index.html").read_text()
    assert "Why drafting gains this much here: a cost model" in html
    assert "What a wider verify block costs here" in html
