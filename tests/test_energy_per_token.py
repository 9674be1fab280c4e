"""Energy you can trust (issue 19): the counter energy of a shot split at its first token, and the
stability rule of each cell's J per output token and per prefill token, on the H200 samples
committed under results/reference/h200 and on a CPU-only run (no counter: not measured)."""

from functools import cache

import pandas as pd
import pytest

from tests.reference_energy import REFERENCE, resummarized_shots
from tests.shot_tables import cell, series, table
from whichshot.figures.aggregations import recompute
from whichshot.figures.cells import cell_id
from whichshot.figures.constants import ENERGY_CLOCK_SPREAD, MIN_ENERGY_COUNTER_UPDATES
from whichshot.figures.energy_figures import (
    BACK_TO_BACK,
    ENERGY_PHASE,
    NOT_MEASURED,
    STABLE,
    UNSTABLE,
    energy_verdict,
)
from whichshot.figures.table import compute_figures, write_figure_tables
from whichshot.measure.series import RecorderTelemetry
from whichshot.report.summary import render_summary
from whichshot.shots.axes import AXES
from whichshot.shots.upgrade import read_shots, upgrade_shots
from whichshot.telemetry.base import NVML_COLUMNS, SAMPLE_COLUMNS, Reading
from whichshot.telemetry.recorder import TelemetryRecorder
from whichshot.telemetry.summary import PHASE_COLUMNS, summarize_shot

H200 = REFERENCE / "h200"
OUTPUT, PREFILL = ENERGY_PHASE["energy_j_per_output_token"], ENERGY_PHASE["energy_j_per_prefill_token"]
# A cell of long decodes (a 0.5B model recalling a 1024-token document back to back) and the
# synthetic 8B's 16K-token prefill with 64 output tokens (1.3 s shots).
RECALL_WARM = "llama_cpp_cuda/qwen_coder_0p5b/verbatim_recall/real/p1024/warm/rest0s/pre0s/ctx4096/same/none"
BIG_PREFILL = (
    "llama_cpp_cuda/synthetic_8b/continue_text/real/p16384/warm/rest{rest}s/pre0s/ctx20480/same/none"
)


@cache
def _resummarized(name: str) -> pd.DataFrame:
    return resummarized_shots(H200 / name)


def shots_of(name: str) -> pd.DataFrame:
    """A fresh copy each time: no test sees another's changes, whatever the order."""
    return _resummarized(name).copy(deep=True)


@cache
def _figures(name: str) -> tuple:
    return compute_figures(shots_of(name), [], 0.7)


def energy_figure(name: str, cell_prefix: str, metric: str):
    figures, _caveats = _figures(name)
    (found,) = [
        f
        for f in figures
        if f.metric == metric and f.cell_id.startswith(cell_prefix) and f.shot_index is None
    ]
    return found


def cited(shots: pd.DataFrame, figure) -> pd.DataFrame:
    return shots.set_index("shot_id", drop=False).loc[figure.shot_ids]


# --- the split of one shot ----------------------------------------------------------------------


def _samples(readings: list[tuple[float, float | None]]) -> list[dict]:
    samples = []
    for t, energy in readings:
        sample = dict.fromkeys(SAMPLE_COLUMNS)
        sample.update(t_mono_s=t, gpu_energy_j=energy, gpu_power_w=500.0)
        samples.append(sample)
    return samples


def test_split_at_a_reading_is_exact_and_between_readings_interpolated():
    # counter read at 0 (mark), 1.0 (tick), 2.0 (tick), 2.5 (mark); 0.25 s ticks between carry no energy
    readings = [(0.0, 1000.0), (0.5, None), (1.0, 1700.0), (1.5, None), (2.0, 2100.0), (2.5, 2300.0)]
    at_reading = summarize_shot(_samples(readings), 0.01, 2.49, 64, first_token_s=1.0)
    assert at_reading["prefill_gpu_energy_j"] == pytest.approx(700.0)
    assert at_reading["decode_gpu_energy_j"] == pytest.approx(600.0)
    assert at_reading["energy_split_gap_s"] == 0.0
    assert (at_reading["prefill_energy_counter_updates"], at_reading["decode_energy_counter_updates"]) == (
        1,
        2,
    )
    assert at_reading["energy_counter_updates"] == 3
    between = summarize_shot(_samples(readings), 0.01, 2.49, 64, first_token_s=1.25)
    assert between["prefill_gpu_energy_j"] == pytest.approx(700.0 + 400.0 * 0.25)  # a quarter of 1.0-2.0
    assert between["prefill_gpu_energy_j"] + between["decode_gpu_energy_j"] == pytest.approx(1300.0)
    assert between["energy_split_gap_s"] == pytest.approx(0.25)
    # the update 1.0 -> 2.0 holds the first token: it is the split's, counted in neither part
    assert (between["prefill_energy_counter_updates"], between["decode_energy_counter_updates"]) == (1, 1)
    assert between["energy_counter_updates"] == 3


def test_no_counter_or_no_first_token_gives_no_split():
    cpu = summarize_shot(_samples([(0.0, None), (1.0, None), (2.0, None)]), 0.1, 1.9, 10, first_token_s=0.5)
    assert {c: cpu[c] for c in PHASE_COLUMNS} == dict.fromkeys(PHASE_COLUMNS)
    failed = summarize_shot(_samples([(0.0, 10.0), (1.0, 20.0)]), 0.1, 0.9, None, first_token_s=None)
    assert failed["prefill_gpu_energy_j"] is None and failed["energy_counter_updates"] == 1
    reset = summarize_shot(
        _samples([(0.0, 900.0), (1.0, 5.0), (2.0, 950.0)]), 0.1, 1.9, 10, first_token_s=0.5
    )
    assert {c: reset[c] for c in PHASE_COLUMNS} == dict.fromkeys(PHASE_COLUMNS)


class _EnergyCounter:
    """A GPU whose counter rises 600 J per second of the times it is asked at."""

    name = "nvml"
    columns = NVML_COLUMNS

    def __init__(self) -> None:
        self.t = 0.0

    def read(self, full: bool = False) -> Reading:
        return Reading({"gpu_energy_j": 600.0 * self.t})

    def close(self) -> None:
        pass


def test_recorder_telemetry_passes_the_first_token_on():
    backend = _EnergyCounter()
    recorder = TelemetryRecorder([backend])
    for t in (0.0, 1.0, 2.0, 3.0):
        backend.t = t
        recorder.sample_once(t_mono_s=t)
    telemetry = RecorderTelemetry(recorder, [])
    split = telemetry.summarize(0.0, 3.0, 64, engine_pid=1, first_token_s=2.0)
    assert (split["prefill_gpu_energy_j"], split["decode_gpu_energy_j"]) == (1200.0, 600.0)
    assert telemetry.summarize(0.0, 3.0, 64, 1)["prefill_gpu_energy_j"] is None  # as before the split


def test_the_split_of_recorded_h200_shots_adds_up_to_the_recorded_energy():
    for name in ("synthetic_8b", "workloads"):
        ok = shots_of(name).query("status == 'ok'")
        assert ok["prefill_gpu_energy_j"].notna().all()
        # the samples give back the energy each shot recorded, to the joule
        recomputed = ok["recomputed_gpu_energy_j"].astype(float)
        assert (recomputed - ok["gpu_energy_j"]).abs().max() < 1e-6
        total = ok["prefill_gpu_energy_j"] + ok["decode_gpu_energy_j"]
        assert (total - ok["gpu_energy_j"]).abs().max() < 1e-6
        assert (ok["prefill_gpu_energy_j"] >= 0).all() and (ok["decode_gpu_energy_j"] >= 0).all()
        parts = ok["prefill_energy_counter_updates"] + ok["decode_energy_counter_updates"]
        assert (parts <= ok["energy_counter_updates"]).all()
        # the counter is read every second: the first token is never more than 0.5 s from a reading
        # plus the shot's edges (a 0.9 s prefill's first token may sit 0.9 s after the start mark)
        assert ok["energy_split_gap_s"].between(0, 1.0).all()


# --- the stability rule -------------------------------------------------------------------------


def test_a_long_decode_cell_on_the_h200_is_stable():
    shots = shots_of("workloads")
    figure = energy_figure("workloads", RECALL_WARM, OUTPUT.metric)
    rows = cited(shots, figure)
    verdict = energy_verdict(rows, OUTPUT)
    assert verdict.state == STABLE, verdict.text
    assert rows[OUTPUT.updates].sum() >= MIN_ENERGY_COUNTER_UPDATES
    assert figure.value == pytest.approx(rows["decode_gpu_energy_j"].sum() / rows["output_tokens"].sum())
    assert figure.kind == "derived" and figure.unit == "J/token"
    assert figure.columns == ["decode_gpu_energy_j", "streams_output_tokens"]
    assert figure.note.startswith("energy verdict: stable")
    assert "output_token_energy_unstable" not in figure.caveat_ids
    # its shots are the warm rule's, as every statistic of the cell
    decode = energy_figure("workloads", RECALL_WARM, "decode_tok_s")
    assert figure.shot_ids == decode.shot_ids
    # the same cell's prefill (about 0.04 s a shot, never two counter readings apart) is not
    prefill = energy_figure("workloads", RECALL_WARM, PREFILL.metric)
    assert energy_verdict(cited(shots, prefill), PREFILL).state == UNSTABLE
    assert "prefill_token_energy_unstable" in prefill.caveat_ids


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"sm_clock_median_mhz": 1980.0 * (1 - 2 * ENERGY_CLOCK_SPREAD)}, "SM clock medians spread"),
        ({"gpu_power_reliable": False}, "NVML power agrees with the counter in 2 of 3"),
        ({"thermal_throttle_seen": True}, "thermal slowdown in 1 of 3"),
    ],
)
def test_the_stable_cell_turns_unstable_when_one_shot_breaks_a_condition(change, reason):
    shots = shots_of("workloads")
    rows = cited(shots, energy_figure("workloads", RECALL_WARM, OUTPUT.metric)).copy()
    assert len(rows) == 3
    for column, value in change.items():
        rows[column] = rows[column].astype(object)
        rows.iloc[0, rows.columns.get_loc(column)] = value
    verdict = energy_verdict(rows, OUTPUT)
    assert verdict.state == UNSTABLE and any(r.startswith(reason) for r in verdict.reasons), verdict.text


def test_short_shots_in_a_back_to_back_series_are_summed_over_the_series_and_still_unstable():
    shots = shots_of("synthetic_8b")
    figure = energy_figure("synthetic_8b", BIG_PREFILL.format(rest=0), OUTPUT.metric)
    # each 0.38 s decode holds about one counter update: the series gives shots 2-6, not the rule's 3-6
    assert figure.which_shot.startswith("warm: from a back-to-back series of 5 shots")
    assert figure.shot_indices == "2-6" and figure.selected_by == BACK_TO_BACK
    rows = cited(shots, figure)
    assert (rows[OUTPUT.updates] < MIN_ENERGY_COUNTER_UPDATES).all()
    verdict = energy_verdict(rows, OUTPUT)
    assert verdict.state == UNSTABLE
    assert any("counter updates" in r for r in verdict.reasons)
    assert any(r.startswith("first token") for r in verdict.reasons)  # 0.38 s windows, 1 s readings
    assert figure.value == pytest.approx(rows["decode_gpu_energy_j"].sum() / rows["output_tokens"].sum())
    assert "output_token_energy_unstable" in figure.caveat_ids
    _figures_list, caveats = _figures("synthetic_8b")
    (caveat,) = [c for c in caveats if c["caveat_id"] == "output_token_energy_unstable"]
    assert figure.figure_id in caveat["figure_ids"]
    assert all(fid.endswith("energy_j_per_output_token") for fid in caveat["figure_ids"])


def test_a_rested_series_is_not_back_to_back_and_keeps_the_warm_rule():
    figure = energy_figure("synthetic_8b", BIG_PREFILL.format(rest=3), OUTPUT.metric)
    assert "back-to-back" not in figure.which_shot and figure.shot_indices == "3-6"
    assert figure.selected_by == "warm"
    verdict = energy_verdict(cited(shots_of("synthetic_8b"), figure), OUTPUT)
    # after a 3 s rest NVML's trailing power average lags the counter in every shot
    assert verdict.state == UNSTABLE
    assert "NVML power agrees with the counter in 0 of 4 shots" in verdict.reasons


def test_shots_recorded_before_the_split_have_a_counter_but_no_energy_per_token():
    shots = read_shots(H200 / "synthetic_8b" / "shots.parquet")  # as committed: no phase columns
    figures, caveats = compute_figures(shots, [], 0.7)
    energy = [f for f in figures if f.metric in (OUTPUT.metric, PREFILL.metric)]
    assert energy and all(f.value is None for f in energy)
    assert all(f.note.startswith("energy verdict: not measured") for f in energy)
    assert not {c["caveat_id"] for c in caveats} & {
        "output_token_energy_unstable",
        "prefill_token_energy_unstable",
    }


# --- no counter: not measured -------------------------------------------------------------------


def test_cpu_only_shots_give_not_measured_and_no_number(tmp_path):
    shots = read_shots(REFERENCE / "cpu_default" / "shots.parquet")
    assert shots["gpu_energy_j"].isna().all()
    for phase in (OUTPUT, PREFILL):
        assert energy_verdict(shots[shots["status"] == "ok"], phase).state == NOT_MEASURED
    figures, caveats = compute_figures(shots, [], 0.7)
    assert not [f for f in figures if f.metric in (OUTPUT.metric, PREFILL.metric)]
    write_figure_tables(figures, caveats, tmp_path / "figures.parquet", tmp_path / "caveats.parquet")
    summary = render_summary(
        pd.read_parquet(tmp_path / "figures.parquet"), pd.read_parquet(tmp_path / "caveats.parquet"), "cpu"
    )
    headline = summary.split("## Cold and warm")[1].split("\n## ")[0]
    header, _rule, *rows = [line for line in headline.splitlines() if line.startswith("|")]
    columns = [c.strip() for c in header.strip("|").split("|")]
    at = columns.index("J/output token (J/token, counter)")
    assert rows and all(row.strip("|").split("|")[at].strip() == "not measured" for row in rows)


def test_the_headline_shows_each_cells_energy_with_its_verdict(tmp_path):
    figures, caveats = _figures("synthetic_8b")
    write_figure_tables(figures, caveats, tmp_path / "figures.parquet", tmp_path / "caveats.parquet")
    summary = render_summary(
        pd.read_parquet(tmp_path / "figures.parquet"), pd.read_parquet(tmp_path / "caveats.parquet"), "h200"
    )
    headline = summary.split("## Cold and warm")[1].split("\n## ")[0]
    assert (
        "J/output token (J/token, counter)" in headline and "J/prefill token (J/token, counter)" in headline
    )
    assert "unstable, from a back-to-back series of 5 shots" in headline
    value = energy_figure("synthetic_8b", BIG_PREFILL.format(rest=0), OUTPUT.metric).value
    assert f"{value:.2f} D" in headline


def test_every_energy_figure_recomputes_from_exactly_the_shots_it_cites():
    for name in ("synthetic_8b", "workloads"):
        shots = shots_of(name)
        figures, _caveats = _figures(name)
        energy = [f for f in figures if f.metric in (OUTPUT.metric, PREFILL.metric)]
        assert len(energy) == 2 * shots.groupby("job_id").ngroups // _series_per_cell(shots)
        by_id = shots.set_index("shot_id", drop=False)
        for f in energy:
            assert f.value is not None and f.kind == "derived"
            assert recompute(f.as_row(), by_id, {}) == pytest.approx(f.value)


def _series_per_cell(shots: pd.DataFrame) -> int:
    (repeats,) = shots.groupby(list(AXES), dropna=False)["job_id"].nunique().unique()
    return int(repeats)


# --- several streams in flight (issue 31) -------------------------------------------------------

FOUR = cell(parallel_streams=4)
# Each shot's four streams: stream 1 decoded 16 tokens, the others 16, 15 and 14 (batched kernels
# may end a stream elsewhere), every one prefilled the same 64-token prompt.
FOUR_STREAMS_OUTPUT_TOKENS = 16 + 16 + 15 + 14
STABLE_GPU = {"sm_clock_median_mhz": 1980.0, "gpu_power_reliable": True, "thermal_throttle_seen": False,
              "energy_split_gap_s": 0.0, "prefill_energy_counter_updates": 30,
              "decode_energy_counter_updates": 30}  # fmt: skip


def _gpu_shot(position: int, streams: int, streams_output_tokens: int | None) -> dict:
    """A shot whose counter saw 100 J of prefill and 900 J + 10 J per position of decode."""
    energy_j = 1000.0 + 10 * position
    return {**STABLE_GPU, "gpu_energy_j": energy_j, "prefill_gpu_energy_j": 100.0,
            "decode_gpu_energy_j": energy_j - 100.0, "first_token_mono_s": 10.0 * position + 0.1,
            "streams_in_flight": streams, "streams_output_tokens": streams_output_tokens,
            "streams_prompt_tokens": None if streams_output_tokens is None else 64 * streams,
            "stream_ttft_max_s": 0.1, "aggregate_decode_tok_s": 190.0,
            "energy_j_per_token": energy_j / (streams_output_tokens or 16)}  # fmt: skip


def _streams_table(four_streams_output_tokens: int | None = FOUR_STREAMS_OUTPUT_TOKENS) -> pd.DataFrame:
    one = [_gpu_shot(p, 1, 16) for p in range(1, 7)]
    four = [_gpu_shot(p, 4, four_streams_output_tokens) for p in range(1, 7)]
    return table(series(cell(), one), series(FOUR, four))


def _cell_figure(figures, of: dict, metric: str):
    (found,) = [
        f for f in figures if f.cell_id == cell_id(of) and f.metric == metric and f.shot_index is None
    ]
    return found


def test_a_four_stream_cells_energy_per_token_divides_by_every_streams_tokens():
    shots = _streams_table()
    figures, _caveats = compute_figures(shots, [], 0.7)
    output = _cell_figure(figures, FOUR, OUTPUT.metric)
    rows = cited(shots, output)
    total_energy_j, total_tokens = rows["decode_gpu_energy_j"].sum(), len(rows) * FOUR_STREAMS_OUTPUT_TOKENS
    assert output.value == pytest.approx(total_energy_j / total_tokens)
    assert list(rows["shot_index"]) == [3, 4, 5, 6] and (rows["parallel_streams"] == 4).all()  # warm rule
    assert output.value != pytest.approx(total_energy_j / rows["output_tokens"].sum())  # stream 1's alone
    assert output.columns == ["decode_gpu_energy_j", "streams_output_tokens"]
    assert output.note.startswith("energy verdict: stable")
    # the prefill energy of four prompts over four prompts' tokens
    prefill = _cell_figure(figures, FOUR, PREFILL.metric)
    assert prefill.value == pytest.approx(4 * 100.0 / (4 * 4 * 64))
    # the one-stream cell beside it is as before: its tokens are stream 1's
    one = _cell_figure(figures, cell(), OUTPUT.metric)
    one_rows = cited(shots, one)
    assert one.value == pytest.approx(one_rows["decode_gpu_energy_j"].sum() / one_rows["output_tokens"].sum())


def test_four_streams_whose_first_tokens_came_apart_split_their_energy_unstably():
    # the last stream's first token 0.5 s after stream 1's, where the energy is split: its prefill
    # there counts as decode energy
    shots = _streams_table()
    shots.loc[shots["parallel_streams"] == 4, "stream_ttft_max_s"] = 0.6
    figures, _caveats = compute_figures(shots, [], 0.7)
    for phase in (OUTPUT, PREFILL):
        verdict = energy_verdict(cited(shots, _cell_figure(figures, FOUR, phase.metric)), phase)
        assert verdict.state == UNSTABLE, verdict.text
        assert verdict.reasons[-1].startswith("the other streams' first tokens up to 2.00 s"), verdict.text
    assert energy_verdict(cited(shots, _cell_figure(figures, cell(), OUTPUT.metric)), OUTPUT).state == STABLE


def test_shots_of_several_streams_without_every_streams_tokens_give_no_energy_per_token():
    # recorded before version 8: the shot kept stream 1's tokens only, and its energy_j_per_token
    # divided every stream's energy by them
    figures, _caveats = compute_figures(_streams_table(None), [], 0.7)
    for metric in (OUTPUT.metric, PREFILL.metric, "energy_j_per_token"):
        found = _cell_figure(figures, FOUR, metric)
        assert found.value is None, metric
    verdict = _cell_figure(figures, FOUR, OUTPUT.metric).note
    assert verdict.startswith("energy verdict: not measured") and "streams_output_tokens" in verdict
    one_stream = _cell_figure(figures, cell(), "energy_j_per_token")
    assert one_stream.value == pytest.approx(1045.0 / 16)  # the median of shots 3-6


def test_two_stream_h200_shots_recorded_with_stream_1s_tokens_divide_by_both_streams():
    """seed_002's 2-stream shots (version 7) stored stream 1's 128 tokens; both streams returned the
    same ids, so the upgrade counts 256 and the per-token energy is half what it read."""
    shots = shots_of("seed_002")
    two = shots[shots["parallel_streams"] == 2]
    assert (two["streams_output_tokens"] == 2 * two["output_tokens"]).all()
    figures, _caveats = compute_figures(shots, [], 0.7)
    per_token = [f for f in figures if f.metric == "energy_j_per_token" and f.shot_index is None]
    two_figures = [f for f in per_token if f.axes["parallel_streams"] == 2]
    assert two_figures and all(f.value is not None for f in two_figures)
    for figure in two_figures:
        used = two[two["shot_id"].isin(figure.shot_ids)]
        expected = (used["gpu_energy_j"] / used["streams_output_tokens"]).median()
        assert figure.value == pytest.approx(expected)
    assert all(f.value is not None for f in per_token if f.axes["parallel_streams"] == 1)


def test_older_shots_of_several_streams_whose_outputs_differ_get_no_output_total():
    shots = shots_of("seed_002")
    two = shots["parallel_streams"] == 2
    recorded = shots.copy()
    recorded.loc[two, "streams_same_output"] = False
    recorded = recorded.drop(columns=["streams_output_tokens", "streams_prompt_tokens"])
    upgraded = upgrade_shots(recorded.assign(schema_version=7))
    assert upgraded.loc[two, "streams_output_tokens"].isna().all()
    assert (upgraded.loc[two, "streams_prompt_tokens"] == 2 * upgraded.loc[two, "prompt_tokens"]).all()


# Figures of a several-stream cell that come from stream 1's request alone.
STREAM_ONE_METRICS = (
    "ttft_s",
    "prefill_tok_s",
    "decode_tok_s",
    "engine_prefill_tok_s",
    "engine_decode_tok_s",
)


def test_stream_1s_figures_of_a_four_stream_cell_say_so_and_no_one_stream_figure_does():
    shots = _streams_table()
    figures, caveats = compute_figures(shots, [], 0.7)
    (caveat,) = [c for c in caveats if c["caveat_id"] == "stream_one_of_several"]
    four = set(shots.loc[shots["parallel_streams"] == 4, "shot_id"])
    assert set(caveat["shot_ids"]) == four
    for metric in STREAM_ONE_METRICS:
        assert "stream_one_of_several" in _cell_figure(figures, FOUR, metric).caveat_ids, metric
    by_index = [f for f in figures if f.cell_id == cell_id(FOUR) and f.shot_index is not None
                and f.metric in STREAM_ONE_METRICS]  # fmt: skip
    assert len(by_index) == 2 * 6 and all("stream_one_of_several" in f.caveat_ids for f in by_index)
    # figures over every stream: their speeds, their tokens' energy, the aggregate against one stream
    for metric in ("aggregate_decode_tok_s", OUTPUT.metric, PREFILL.metric, "energy_j_per_token",
                   "aggregate_decode_vs_one_stream"):  # fmt: skip
        assert "stream_one_of_several" not in _cell_figure(figures, FOUR, metric).caveat_ids, metric
    touched = [f for f in figures if "stream_one_of_several" in f.caveat_ids]
    assert all(set(f.shot_ids) & four for f in touched)
    assert [f.figure_id for f in touched] == caveat["figure_ids"]
    one_stream = [f for f in figures if f.shot_ids and not set(f.shot_ids) & four]
    assert one_stream and not [f for f in one_stream if "stream_one_of_several" in f.caveat_ids]
    # a run of one stream only: the caveat does not fire at all
    only_one = table(series(cell(), [_gpu_shot(p, 1, 16) for p in range(1, 7)]))
    assert "stream_one_of_several" not in {c["caveat_id"] for c in compute_figures(only_one, [], 0.7)[1]}
