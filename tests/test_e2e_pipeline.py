"""Real end-to-end run: real llama-server built from the pinned sdist, real model, real text."""

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.pipeline import load_config, run_pipeline
from whichshot.figures.provenance import KINDS
from whichshot.measure.run_phases import run_phases
from whichshot.tables import record_schema

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def shots(smoke_run):
    return pd.read_parquet(smoke_run["workdir"] / "results" / "shots.parquet")


def test_every_planned_shot_is_a_row(shots):
    config = load_config("smoke")
    per_length = config["protocol"]["cold_processes"] + config["protocol"]["warm_shots"]
    assert len(shots) == per_length * len(config["prompts"]["lengths"])
    assert (shots["status"] == "ok").all(), shots[shots["status"] != "ok"]["error"].tolist()


def test_measured_values_exist_where_they_must(shots):
    must = ["ttft_s", "prefill_tok_s", "decode_tok_s", "e2e_s", "engine_decode_tok_s",
            "engine_prefill_tok_s", "output_sha256", "build_id", "model_sha256",
            "process_ready_s"]  # fmt: skip
    assert not shots[must].isna().any().any(), shots[must].isna().sum()
    assert (shots["ttft_s"] > 0).all() and (shots["decode_tok_s"] > 0).all()


def test_cold_shots_are_shot_one_of_distinct_processes(shots):
    cold = shots[shots["protocol"] == "cold"]
    assert (cold["shot_index"] == 1).all()
    for _job, series in cold.groupby("job_id"):
        assert series["process_id"].nunique() == len(series)
        assert series["pid"].nunique() == len(series)


def test_warm_series_is_one_process_in_order(shots):
    warm = shots[shots["protocol"] == "warm"]
    for _job, series in warm.groupby("job_id"):
        assert series["process_id"].nunique() == 1
        assert sorted(series["shot_index"]) == list(range(1, len(series) + 1))


def test_prompt_and_output_token_counts_are_exact(shots):
    assert (shots["engine_prompt_tokens"] == shots["prompt_tokens"]).all()
    assert (shots["output_tokens"] == shots["output_tokens_requested"]).all()
    assert (shots["engine_cached_tokens"].fillna(0) == 0).all()
    assert shots["output_token_ids"].map(len).eq(shots["output_tokens"]).all()


def test_greedy_output_is_identical_across_processes(shots):
    # Same prompt, greedy, no drafting: every shot at one length must produce the same tokens.
    for _length, group in shots.groupby("prompt_tokens"):
        assert group["output_sha256"].nunique() == 1


def test_parquet_carries_schema_version(smoke_run):
    metadata = pq.read_schema(smoke_run["workdir"] / "results" / "shots.parquet").metadata
    assert metadata[b"schema_version"] == str(record_schema("shots")["x-schema-version"]).encode()


def test_figures_have_a_provenance_kind(smoke_run):
    figures = pd.read_parquet(smoke_run["workdir"] / "results" / "figures.parquet")
    assert set(figures["kind"]) <= set(KINDS)
    assert figures["figure_id"].is_unique
    assert {"cold", "warm"} <= set(figures["protocol"].dropna())
    assert {"bench_pp_tok_s", "bench_tg_tok_s", "prefill_vs_llama_bench_ratio"} <= set(figures["metric"])
    assert {"decode_vs_llama_bench_ratio_low", "decode_vs_llama_bench_ratio_high"} <= set(figures["metric"])
    html = (smoke_run["workdir"] / "results" / "report" / "index.html").read_text()
    for figure_id in figures["figure_id"]:
        assert f'data-figure-id="{figure_id}"' in html


def test_llama_bench_runs_the_same_work_right_before_and_after_each_warm_series(smoke_run, shots):
    """Prefill from an empty context and decode after the prompt (llama-bench -d), with the server's
    threads, batch, micro-batch and GPU layers, in brackets around the series' shots."""
    results = smoke_run["workdir"] / "results"
    for job_id, series in shots.groupby("job_id"):
        bench = json.loads((results / "bench" / f"{job_id}.json").read_text())
        if series["protocol"].iloc[0] != "warm":
            assert bench["brackets"] == [] and "warm series" in bench["not_run"]
            continue
        before, after = bench["brackets"]
        assert before["t_end_mono_s"] < series["t_request_mono_s"].min()
        assert after["t_start_mono_s"] > series["t_end_mono_s"].max()
        prompt_tokens = int(series["prompt_tokens"].iloc[0])
        for bracket in (before, after):
            assert bracket["error"] is None
            tests = {row["test"]: row for row in bracket["rows"]}
            assert (tests["pp"]["n_prompt"], tests["pp"]["n_depth"]) == (prompt_tokens, 0)
            assert (tests["tg"]["n_gen"], tests["tg"]["n_depth"]) == (16, prompt_tokens)
            for row in tests.values():
                assert (row["n_threads"], row["n_batch"], row["n_ubatch"], row["n_gpu_layers"]) == (
                    2,
                    2048,
                    512,
                    0,
                )
                assert len(row["samples_tok_s"]) == 1  # bench.repetitions
        server_log = next((smoke_run["workdir"] / "logs" / "engines" / job_id).glob("*.log")).read_text()
        context = int(series["context_tokens_requested"].iloc[0])
        for setting in (
            f"n_batch               = {min(2048, context)}",  # llama.cpp caps the batch at the context
            "n_ubatch              = 512",
            "flash_attn            = auto",
        ):
            assert setting in server_log  # the server ran with the settings llama-bench was given


def test_no_engine_outlives_the_run(smoke_run):
    assert smoke_run["leftover_engines"] == []


def test_noop_rerun_executes_nothing(smoke_run):
    result = run_pipeline(smoke_run["workdir"], load_config("smoke"), "--dry-run")
    assert result.returncode == 0
    assert "Nothing to be done" in result.stdout + result.stderr
    assert "Estimated duration: smoke: nothing to measure: all " in result.stderr  # not minutes of it


def test_run_phases_account_for_the_jobs_and_the_series(smoke_run, shots):
    results = smoke_run["workdir"] / "results"
    phases = run_phases(results)["seconds"]
    for rule in ("build_engine", "fetch_model", "build_prompts", "aggregate_shots", "compute_figures",
                 "render_report"):  # fmt: skip
        assert phases[f"job: {rule}"] >= 0, rule
    assert phases["series: process start-up"] == pytest.approx(
        shots.drop_duplicates("process_id")["process_ready_s"].sum(), abs=0.1
    )
    assert phases["series: decode (first token to answer)"] > 0
    assert phases["series: llama-bench brackets"] > 0  # the smoke grid has warm series, each bracketed
    requests = shots["e2e_s"].sum()
    measured = sum(phases[p] for p in phases.index if p.startswith("series:") and "bench" not in p)
    assert measured >= requests  # the telemetry window holds every request


def test_the_series_ran_in_the_planned_order_and_each_cells_sides_alternate(shots):
    """Snakemake started the series in the run's order (measure.order, run_series' priority), one
    after another, and each cell's sides took turns: what the shots recorded and when they ran."""
    series = shots.groupby("job_id").agg(
        start=("t_request_mono_s", "min"), end=("t_end_mono_s", "max"), position=("order_position", "first"),
        cell=("order_cell", "first"), block=("order_block", "first"), slot=("order_slot", "first"),
        side=("protocol", "first"),
    )  # fmt: skip
    in_time = series.sort_values("start")
    assert list(in_time["position"]) == sorted(in_time["position"]) == list(range(1, len(series) + 1))
    assert (in_time["start"].iloc[1:].to_numpy() > in_time["end"].iloc[:-1].to_numpy()).all()  # no overlap
    for cell, runs in in_time.groupby("cell", sort=False):
        sides = list(runs["side"])
        assert sorted(set(sides)) == ["cold", "warm"], cell
        blocks = [list(block["side"]) for _b, block in runs.groupby("block")]
        assert all(sorted(block) == ["cold", "warm"] for block in blocks), cell  # each block holds both sides
        assert all(later == earlier[::-1] for earlier, later in zip(blocks, blocks[1:], strict=False)), cell
        assert (runs.groupby("block")["slot"].apply(list) == [[1, 2]] * len(blocks)).all(), cell
