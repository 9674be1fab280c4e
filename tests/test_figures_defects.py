"""Each defect of the old figure stage (issue 14), on hand-made shots: what a figure cites, its
kind, and which caveats reach it."""

import copy

import pytest

from tests.shot_tables import cell, job_id, series, table
from whichshot.figures.table import compute_figures
from whichshot.shots.checks import POWER_COUNTER_AGREEMENT, power_agrees_with_counter
from whichshot.shots.lossless import with_lossless

WARM = cell()
COLD = cell(protocol="cold")


def run(*parts, bench=None):
    figures, caveats = compute_figures(table(*parts), bench or [], 0.7)
    return {f.figure_id: f for f in figures}, {c["caveat_id"]: c for c in caveats}


def only(figures: dict, metric: str, **axes):
    found = [
        f
        for f in figures.values()
        if f.metric == metric and f.shot_index is None and all(f.axes.get(a) == v for a, v in axes.items())
    ]
    assert len(found) == 1, [f.figure_id for f in found]
    return found[0]


def test_a_warm_figure_cites_exactly_the_shots_its_value_used():
    # shot 5 of 6 failed: the old figure cited rule positions 3-6 of the series (5 among them)
    values = [{"decode_tok_s": v} for v in (10.0, 20.0, 30.0, 40.0)] + [None, {"decode_tok_s": 60.0}]
    figures, caveats = run(series(WARM, values))
    decode = only(figures, "decode_tok_s", protocol="warm")
    assert [s.rsplit("/", 1)[1] for s in decode.shot_ids] == ["shot2", "shot3", "shot4"]
    assert decode.value == 30.0 and decode.shot_indices == "2-4"
    assert "warm_series_broken" in decode.caveat_ids and "failed_shots" in decode.caveat_ids


def test_a_one_shot_warm_series_has_no_warm_value_and_a_caveat_says_why():
    figures, caveats = run(series(WARM, [{"decode_tok_s": 50.0}]))
    decode = only(figures, "decode_tok_s", protocol="warm")
    assert decode.value is None and decode.shot_ids  # it names the shot it examined
    assert "no two consecutive ok shots" in caveats["warm_series_broken"]["sentence"]
    assert decode.figure_id in caveats["warm_series_broken"]["figure_ids"]


def test_one_shot_figures_take_the_kind_of_their_column_whatever_the_protocol():
    figures, _ = run(series(COLD, [{}]), series(WARM, [{}, {}]))
    cold_ttft, warm_ttft = only(figures, "ttft_s", protocol="cold"), only(figures, "ttft_s", protocol="warm")
    assert len(warm_ttft.shot_ids) == 1 and (cold_ttft.kind, warm_ttft.kind) == ("measured", "measured")
    assert only(figures, "decode_tok_s", protocol="warm").kind == "derived"  # a rate is arithmetic
    assert only(figures, "engine_decode_tok_s", protocol="cold").kind == "engine-reported"
    figures, _ = run(series(WARM, [{}, {}, {}, {}]))
    assert only(figures, "ttft_s", protocol="warm").kind == "derived"  # a median of 3 shots


def workload(mode: str, **values) -> dict:
    return cell(workload="verbatim_recall", prompt_tokens_requested=384, spec_mode=mode)


def test_shares_and_acceptance_are_derived_not_measured_or_engine_reported():
    drafted = [
        {
            "lossless_vs_none": True,
            "engine_draft_tokens": 10,
            "engine_draft_accepted": 7,
            "recall_exact": True,
            "engine_draft_mean_len": 3.0,
        }
    ] * 3
    figures, _ = run(
        series(workload("none"), [{"recall_exact": True}] * 3), series(workload("ngram"), drafted)
    )
    for metric in ("lossless_share", "recall_exact_share", "acceptance_rate", "speedup_vs_none"):
        assert only(figures, metric, spec_mode="ngram").kind == "derived", metric
    assert only(figures, "acceptance_rate", spec_mode="ngram").value == pytest.approx(0.7)


def test_a_speed_up_over_other_output_lengths_says_so():
    none = [{"output_tokens": 512, "decode_tok_s": 100.0}] * 3
    drafted = [
        {"output_tokens": 51, "decode_tok_s": 300.0, "lossless_vs_none": False, "first_divergence_token": 40}
    ] * 3
    figures, caveats = run(series(workload("none"), none), series(workload("ngram"), drafted))
    speedup = only(figures, "speedup_vs_none")
    assert speedup.value == pytest.approx(3.0)
    assert {"output_lengths_differ", "lossless_check_failed"} <= set(speedup.caveat_ids)
    # the no-draft cell's own speed compares nothing: no output-length caveat on it
    assert "output_lengths_differ" not in only(figures, "decode_tok_s", spec_mode="none").caveat_ids


def test_a_failed_drafted_shot_is_no_other_output_length():
    same = [{"output_tokens": 128, "decode_tok_s": 100.0}] * 3
    figures, caveats = run(series(workload("none"), same), series(workload("ngram"), [*same[:2], None]))
    assert "output_lengths_differ" not in caveats and "failed_shots" in caveats


def test_failed_shots_and_a_killed_engine_reach_the_figures_of_their_cell():
    shots = series(WARM, [{}, {}, None, {}, {}, {}], processes=[1, 1, 1, 2, 2, 2])
    figures, caveats = run(shots, series(COLD, [{}, {}]))
    assert caveats["failed_shots"]["figure_ids"]
    warm_ok = only(figures, "shots_ok", protocol="warm")
    assert warm_ok.value == 5 and warm_ok.figure_id in caveats["failed_shots"]["figure_ids"]
    assert only(figures, "shots_ok", protocol="cold").figure_id not in caveats["failed_shots"]["figure_ids"]


def bench_run(pp: float, tg: float) -> dict:
    """An older run's llama-bench file: once per engine and model, means only."""
    rows = [
        {"test": "pp", "n_prompt": 64, "n_gen": 0, "avg_tok_s": pp, "std_tok_s": 1.0, "repetitions": 3},
        {"test": "tg", "n_prompt": 0, "n_gen": 16, "avg_tok_s": tg, "std_tok_s": 0.5, "repetitions": 3},
    ]
    return {"engine": "eng", "model": "m", "rows": rows}


def bracketed_run(of: dict, pp: dict[str, list[float]], tg: dict[str, list[float]]) -> dict:
    """A series' llama-bench file: every repetition of each bracket, the same work as the series."""
    settings = {"n_threads": 2, "n_batch": 2048, "n_ubatch": 512, "n_gpu_layers": 0, "flash_attn": "auto"}

    def row(test, samples):
        work = (
            {"n_prompt": 64, "n_gen": 0, "n_depth": 0}
            if test == "pp"
            else {"n_prompt": 0, "n_gen": 16, "n_depth": 64}
        )
        return {"test": test, **work, **settings, "samples_tok_s": samples}

    brackets = [{"bracket": b, "rows": [row("pp", pp[b]), row("tg", tg[b])], "error": None} for b in pp]
    return {"job_id": job_id(of), "engine": "eng", "model": "m", "brackets": brackets}


def test_same_work_llama_bench_gives_a_ratio_with_its_range_and_tells_noise_from_a_difference():
    warm = [{"engine_prefill_tok_s": v, "engine_decode_tok_s": d} for v, d in
            ((100.0, 40.0), (600.0, 49.0), (650.0, 50.0), (700.0, 51.0))]  # fmt: skip
    pp = {"before": [640.0, 660.0], "after": [600.0, 700.0]}  # overlaps ours: noise
    tg = {"before": [56.0, 57.0], "after": [55.0, 58.0]}  # every pairing below 1: systematic
    figures, caveats = run(series(WARM, warm), bench=[bracketed_run(WARM, pp, tg)])
    assert only(figures, "bench_pp_tok_s").value == pytest.approx(650.0)  # mean of all 4 repetitions
    assert only(figures, "bench_pp_tok_s").kind == "derived"  # arithmetic on the tool's samples
    assert only(figures, "bench_pp_tok_s_highest").kind == "engine-reported"  # one value it printed
    prefill = only(figures, "prefill_vs_llama_bench_ratio")
    assert prefill.value == pytest.approx(1.0)
    low, high = (
        only(figures, "prefill_vs_llama_bench_ratio_low"),
        only(figures, "prefill_vs_llama_bench_ratio_high"),
    )
    assert (low.value, high.value) == (pytest.approx(600.0 / 700.0), pytest.approx(700.0 / 600.0))
    assert [s.rsplit("/", 1)[1] for s in low.shot_ids] == ["shot2", "shot3", "shot4"]  # the warm rule
    decode = only(figures, "decode_vs_llama_bench_ratio")
    assert decode.value == pytest.approx(50.0 / 56.5)
    assert only(figures, "decode_vs_llama_bench_ratio_high").value == pytest.approx(51.0 / 55.0)
    said = caveats["bench_disagree"]
    assert decode.figure_id in said["figure_ids"] and prefill.figure_id not in said["figure_ids"]
    assert "1 of them every pairing" in said["sentence"] and "not the same work" not in said["sentence"]
    assert any(s.endswith("before.tg16@d64") for s in decode.source_ids)


def test_llama_bench_ratios_use_the_warm_rule_and_carry_the_rival_tool_caveat():
    warm = [{"engine_prefill_tok_s": v, "engine_decode_tok_s": 50.0} for v in (100.0, 600.0, 650.0, 700.0)]
    figures, caveats = run(series(WARM, warm), bench=[bench_run(650.0, 55.0)])
    prefill = only(figures, "prefill_vs_llama_bench_ratio")
    assert prefill.value == pytest.approx(650.0 / 650.0)  # the warm rule's median (shots 2-4), not shot 1
    assert [s.rsplit("/", 1)[1] for s in prefill.shot_ids] == ["shot2", "shot3", "shot4"]
    decode = only(figures, "decode_vs_llama_bench_ratio")
    assert decode.value == pytest.approx(50.0 / 55.0)
    for figure in (prefill, decode, only(figures, "bench_pp_tok_s"), only(figures, "bench_tg_tok_s")):
        assert "rival_tool_figure" in figure.caveat_ids, figure.figure_id
    assert decode.figure_id in caveats["bench_disagree"]["figure_ids"]  # 9 % apart
    assert "not the same work" in caveats["bench_disagree"]["sentence"]  # an empty context, run apart
    assert only(figures, "bench_tg_tok_s").kind == "engine-reported"


def test_power_comes_from_the_counter_and_a_disagreeing_median_is_caveated():
    assert power_agrees_with_counter(690.0, 700.0) is True
    assert power_agrees_with_counter(450.0, 700.0) is False  # the H200's 0.6-0.74 of the counter
    assert power_agrees_with_counter(450.0, None) is None
    assert POWER_COUNTER_AGREEMENT < 0.26
    shots = [
        {
            "gpu_power_median_w": 450.0,
            "gpu_energy_power_w": 690.0,
            "gpu_power_reliable": False,
            "gpu_energy_j": 1035.0,
            "energy_j_per_token": 64.7,
        }
    ] * 4
    figures, caveats = run(series(WARM, shots))
    unreliable = caveats["power_reading_unreliable"]["figure_ids"]
    assert only(figures, "gpu_power_median_w").figure_id in unreliable
    assert only(figures, "gpu_energy_power_w").figure_id not in unreliable
    assert only(figures, "energy_j_per_token").figure_id not in unreliable


def test_energy_of_a_shot_shorter_than_the_counter_allows_is_caveated():
    short = [{"gpu_energy_j": 50.0, "energy_j_per_token": 3.1, "gpu_energy_power_w": 500.0}] * 3
    rows = series(WARM, short)
    for row in rows:
        row["t_end_mono_s"] = row["t_request_mono_s"] + 0.1
    figures, caveats = run(rows)
    touched = caveats["energy_counter_uncertain"]["figure_ids"]
    assert only(figures, "energy_j_per_token").figure_id in touched
    assert only(figures, "decode_tok_s").figure_id not in touched
    figures, caveats = run(series(WARM, [{**s} for s in short]))  # 1.5 s shots: fine
    assert "energy_counter_uncertain" not in caveats


def test_missing_host_load_and_few_telemetry_samples_are_said():
    rows = [
        {
            "host_foreign_cores": None,
            "cpu_freq_median_mhz": 2100.0,
            "telemetry_samples": 1,
            "telemetry_backends": "linux",
        }
    ] * 3
    figures, caveats = run(series(WARM, rows))
    assert only(figures, "decode_tok_s").figure_id in caveats["host_load_not_measured"]["figure_ids"]
    few = caveats["few_telemetry_samples"]["figure_ids"]
    assert only(figures, "cpu_freq_median_mhz").figure_id in few
    assert only(figures, "decode_tok_s").figure_id not in few


def test_the_lossless_check_leaves_the_shot_records_as_they_were():
    none = series(workload("none"), [{"output_token_ids": [1, 2, 3]}])
    drafted = series(workload("ngram"), [{"output_token_ids": [1, 2, 4]}])
    records = none + drafted
    before = copy.deepcopy(records)
    marked = with_lossless(records)
    assert records == before
    assert (marked[1]["lossless_vs_none"], marked[1]["first_divergence_token"]) == (False, 2)
    assert marked[0]["lossless_vs_none"] is None


def test_engines_compared_after_different_warm_ups_carry_a_caveat():
    llama = cell(engine="llama", protocol="cold")
    hf = cell(engine="hf", protocol="cold")
    ran = {"llama": "one decode before ready", "hf": "none"}
    rows = [series(of, [{}, {}]) for of in (llama, hf)]
    for part in rows:
        for row in part:
            row["engine_warmup_run"] = ran[row["engine"]]
    figures, caveats = run(*rows)
    ratio = only(figures, "xengine_decode_ratio")
    assert ratio.figure_id in caveats["engine_warmup_differs"]["figure_ids"]
    assert (
        "engine_warmup_differs" not in only(figures, "decode_tok_s", engine="hf").caveat_ids
    )  # compares nothing
    for part in rows:
        for row in part:
            row["engine_warmup_run"] = "one decode before ready"
    _figures, caveats = run(*rows)
    assert "engine_warmup_differs" not in caveats


def test_a_prefill_nothing_says_was_full_carries_a_caveat():
    unknown = [{"prompt_cache_state": "not known", "engine_cached_tokens": None}] * 3
    figures, caveats = run(series(WARM, unknown))
    touched = caveats["prompt_cache_state_unknown"]["figure_ids"]
    assert only(figures, "prefill_tok_s").figure_id in touched
    assert only(figures, "decode_tok_s").figure_id not in touched
    counted = [{"prompt_cache_state": "not known", "engine_cached_tokens": 0}] * 3  # usage said: none reused
    _figures, caveats = run(series(WARM, counted))
    assert "prompt_cache_state_unknown" not in caveats
