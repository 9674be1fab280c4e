"""Power-wall figures and their caveats on hand-made shot tables (seed 000, sections 1-3)."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from whichshot.caveats import (
    Evidence,
    clock_dropped_thermal_normal,
    cold_vs_warm_compared,
    cycle_count_changed,
    power_reading_unreliable,
)
from whichshot.figure_table import compute_figures
from whichshot.figures import KINDS
from whichshot.power import (
    clock_ratio_figures,
    cold_sibling_label,
    energy_figures,
    outlier_figures,
    power_figures,
    thermal_normal_clock_drop_figures,
)
from whichshot.stats import WarmRule

RULE = WarmRule(0.7)
COLD = "eng.model.p4096.cold.ctx20480.same"
WARM = "eng.model.p4096.warm-rest0s-pre0s.ctx20480.same"
SCHEMA = Path(__file__).parent.parent / "workflow" / "schemas" / "shots.schema.yaml"


def shot(label: str, position: int, **columns) -> dict:
    """One ok shot row with the columns the power figures read; telemetry absent unless given."""
    protocol = "cold" if ".cold." in label else "warm"
    job_id = f"{label}.rep1"
    row = {
        "status": "ok",
        "series_label": label,
        "job_id": job_id,
        "shot_id": f"{job_id}/shot{position}",
        "engine": "eng",
        "model": "model",
        "prompt_tokens": 4096,
        "protocol": protocol,
        "rest_s": 0.0,
        "series_position": position,
        "shot_index": 1 if protocol == "cold" else position,
        "prefill_tok_s": None,
        "decode_tok_s": None,
        "sm_clock_median_mhz": None,
        "sm_clock_min_mhz": None,
        "cpu_freq_median_mhz": None,
        "throttle_reasons_seen": None,
        "thermal_throttle_seen": None,
        "gpu_power_median_w": None,
        "gpu_power_reliable": None,
        "gpu_energy_j": None,
        "energy_j_per_token": None,
        "telemetry_fallbacks": None,
    }
    row.update(columns)
    return row


def series(label: str, prefill: list[float], clock_mhz: list[float] | None = None, **columns) -> list[dict]:
    clocks = clock_mhz or [None] * len(prefill)
    return [
        shot(label, i, **{"prefill_tok_s": p, "decode_tok_s": 40.0, "sm_clock_median_mhz": c, **columns})
        for i, (p, c) in enumerate(zip(prefill, clocks, strict=True), start=1)
    ]


def seed_shots() -> pd.DataFrame:
    """The seed's numbers: cold 980 tok/s at 1296 MHz; warm ~845 at 1116 MHz from shot 3 on."""
    cold = series(COLD, [979.0, 980.0, 982.0], [1296.0, 1296.0, 1296.0])
    warm = series(WARM, [980.0, 900.0, 845.0, 844.0, 846.0, 845.0],
                  [1296.0, 1200.0, 1116.0, 1116.0, 1115.0, 1117.0])  # fmt: skip
    return pd.DataFrame(cold + warm)


def first_shot_slower_shots() -> pd.DataFrame:
    """The H200 case: shot 1 of a process 20 % slower at the same clock (one-time work)."""
    cold = series(COLD, [800.0, 800.0, 800.0], [1800.0] * 3)
    warm = series(WARM, [800.0, 960.0, 960.0, 960.0, 960.0, 960.0], [1800.0] * 6)
    return pd.DataFrame(cold + warm)


def other_cell(prompt_tokens: int) -> str:
    return WARM.replace("p4096", f"p{prompt_tokens}")


def by_metric(figures) -> dict:
    return {f.metric: f for f in figures}


def test_cold_sibling_label():
    assert cold_sibling_label(WARM) == COLD
    assert cold_sibling_label("eng.model.p16384.warm-rest3s-pre0s.ctx20480.reverse") == (
        "eng.model.p16384.cold.ctx20480.reverse"
    )
    assert cold_sibling_label("not-a-label") is None


def test_clock_ratio_reproduces_the_seed_arithmetic():
    figures = by_metric(clock_ratio_figures(seed_shots(), RULE))
    predicted = figures["prefill_tok_s_clock_predicted"]
    assert predicted.value == pytest.approx(980 * 1116 / 1296)
    assert round(predicted.value, 1) == 843.9
    assert predicted.kind == "inferred"
    assert "1296 MHz" in predicted.formula and "1116 MHz" in predicted.formula
    assert "median of the last 70% of 6 shots (shots 3-6)" in predicted.formula
    measured = figures["prefill_tok_s_warm_measured"]
    assert measured.value == pytest.approx(845.0)
    assert measured.kind == "derived"
    residual = figures["prefill_tok_s_clock_residual"]
    assert residual.value == pytest.approx(845 / (980 * 1116 / 1296) - 1)
    assert residual.value == pytest.approx(0.0013, abs=5e-5)
    assert residual.kind == "inferred"
    assert residual.note.startswith("clock only")
    ratio = figures["prefill_tok_s_warm_cold_ratio"]
    assert ratio.value == pytest.approx(845 / 980)
    assert ratio.kind == "derived"
    assert figures["clock_cold_mhz"].value == 1296.0
    assert figures["clock_warm_mhz"].value == 1116.0
    # decode did not change although the clock dropped: the check says so
    assert figures["decode_tok_s_clock_residual"].note.startswith("cycle count changed")


def test_clock_ratio_ids_follow_the_warm_series_label():
    ids = [f.figure_id for f in clock_ratio_figures(seed_shots(), RULE)]
    assert "eng/model/p4096/warm-rest0s-pre0s/ctx20480/same/prefill_tok_s_clock_predicted" in ids
    assert len(ids) == len(set(ids))


def test_first_shot_slower_at_equal_clocks_is_a_cycle_count_change():
    figures = by_metric(clock_ratio_figures(first_shot_slower_shots(), RULE))
    residual = figures["prefill_tok_s_clock_residual"]
    assert residual.value == pytest.approx(0.2)
    assert residual.note.startswith("cycle count changed")
    assert "faster" in residual.note


def test_clock_ratio_needs_a_cold_sibling_and_clocks():
    warm_only = pd.DataFrame(series(WARM, [845.0] * 6, [1116.0] * 6))
    assert clock_ratio_figures(warm_only, RULE) == []
    no_clocks = pd.DataFrame(series(COLD, [980.0] * 3) + series(WARM, [845.0] * 6))
    assert clock_ratio_figures(no_clocks, RULE) == []


def test_clock_ratio_falls_back_to_cpu_clock_and_says_it_may_be_nominal():
    fallback = "cpu_freq_mhz: using 'cpu MHz' from /proc/cpuinfo"
    rows = series(COLD, [100.0] * 3, cpu_freq_median_mhz=2445.0, telemetry_fallbacks=fallback) + series(
        WARM, [100.0] * 6, cpu_freq_median_mhz=2445.0, telemetry_fallbacks=fallback
    )
    figures = by_metric(clock_ratio_figures(pd.DataFrame(rows), RULE))
    assert "CPU clock" in figures["prefill_tok_s_clock_predicted"].formula
    assert "nominal" in figures["prefill_tok_s_clock_predicted"].note
    assert figures["prefill_tok_s_clock_residual"].note.startswith("clock only")
    assert "nominal" in figures["prefill_tok_s_clock_residual"].note
    sysfs = series(COLD, [100.0] * 3, cpu_freq_median_mhz=2445.0) + series(
        WARM, [100.0] * 6, cpu_freq_median_mhz=2445.0
    )
    assert (
        "nominal"
        not in by_metric(clock_ratio_figures(pd.DataFrame(sysfs), RULE))["prefill_tok_s_clock_predicted"].note
    )


def thermal_shots(thermal_seen, label: str = WARM) -> pd.DataFrame:
    rows = [
        shot(label, 1, sm_clock_median_mhz=1980.0, sm_clock_min_mhz=1975.0,
             throttle_reasons_seen="", thermal_throttle_seen=False),
        shot(label, 2, sm_clock_median_mhz=1800.0, sm_clock_min_mhz=1500.0,
             throttle_reasons_seen="sw_power_cap", thermal_throttle_seen=thermal_seen),
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_clock_drop_with_thermal_normal_is_counted_with_its_reasons():
    (figure,) = thermal_normal_clock_drop_figures(thermal_shots(False))
    assert figure.value == 1
    assert figure.unit == "shots"
    assert figure.kind == "derived"
    assert "sw_power_cap" in figure.note
    assert figure.shot_ids == [f"{WARM}.rep1/shot2"]


@pytest.mark.parametrize("thermal_seen", [True, None])
def test_clock_drop_with_thermal_reported_or_unknown_is_not_counted(thermal_seen):
    (figure,) = thermal_normal_clock_drop_figures(thermal_shots(thermal_seen))
    assert figure.value == 0
    assert figure.note == ""


def test_clock_drop_figures_need_gpu_clocks():
    assert thermal_normal_clock_drop_figures(pd.DataFrame(series(WARM, [845.0] * 6))) == []


def outlier_shots(decode_last: float, label: str = WARM) -> pd.DataFrame:
    prefill = [100.0, 101.0, 99.0, 100.5, 99.5, 60.0]
    decode = [50.0, 50.5, 49.5, 50.2, 49.8, decode_last]
    rows = [shot(label, i, prefill_tok_s=p, decode_tok_s=d)
            for i, (p, d) in enumerate(zip(prefill, decode, strict=True), start=1)]  # fmt: skip
    return pd.DataFrame(rows)


def test_outlier_with_decode_slowed_at_the_same_time():
    (figure,) = outlier_figures(outlier_shots(decode_last=49.0))
    assert figure.value == 1
    assert figure.shot_ids == [f"{WARM}.rep1/shot6"]
    assert "prefill_tok_s z=" in figure.note
    assert "decode slowed at the same time" in figure.note


def test_outlier_without_decode_slowing():
    (figure,) = outlier_figures(outlier_shots(decode_last=50.1))
    assert figure.value == 1
    assert "decode did not slow" in figure.note


def test_no_outliers_and_too_short_series():
    (figure,) = outlier_figures(pd.DataFrame(series(WARM, [100.0, 101.0, 99.0, 100.5, 99.5, 100.2])))
    assert figure.value == 0
    assert outlier_figures(pd.DataFrame(series(COLD, [979.0, 980.0, 500.0]))) == []


def energy_shots(label: str = WARM) -> pd.DataFrame:
    rows = [
        shot(label, i, gpu_energy_j=64.0 * j, energy_j_per_token=j,
             gpu_power_median_w=w, gpu_power_reliable=ok)
        for i, (j, w, ok) in enumerate(
            [(1.0, 300.0, True), (1.0, 300.0, True), (2.0, 690.0, True),
             (2.0, 250.0, False), (3.0, 680.0, True), (2.5, 700.0, True)], start=1)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_energy_per_token_and_power_median_leave_unreliable_power_out():
    figures = by_metric(energy_figures(energy_shots(), RULE))
    per_token = figures["gpu_energy_j_per_token"]
    assert per_token.value == pytest.approx(2.25)  # shots 3-6: 2, 2, 3, 2.5
    assert per_token.kind == "derived" and per_token.unit == "J/token"
    power = figures["gpu_power_median_w"]
    assert power.value == pytest.approx(690.0)  # shots 3, 5, 6; shot 4 (unreliable) left out
    assert f"{WARM}.rep1/shot4" not in power.shot_ids
    assert "1 shot(s) with an unreliable reading" in power.formula


def test_energy_figures_need_an_energy_counter():
    assert energy_figures(pd.DataFrame(series(WARM, [845.0] * 6)), RULE) == []


def test_every_power_figure_kind_is_known():
    parts = [thermal_shots(False, other_cell(1024)), outlier_shots(49.0, other_cell(2048)),
             energy_shots(other_cell(8192))]  # fmt: skip
    shots = pd.concat([seed_shots(), *parts])
    figures = power_figures(shots, RULE)
    assert figures
    assert all(f.kind in KINDS for f in figures)


# --- caveats -----------------------------------------------------------------------------------------


def evidence(shots: pd.DataFrame) -> Evidence:
    return Evidence(shots, power_figures(shots, RULE))


def test_clock_dropped_caveat_fires_only_on_a_drop_with_thermal_normal():
    caveat = clock_dropped_thermal_normal(evidence(thermal_shots(False)))
    assert caveat is not None
    assert "sw_power_cap" in caveat.sentence
    assert any(i.endswith("/clock_drop_thermal_normal_shots") for i in caveat.figure_ids)
    assert clock_dropped_thermal_normal(evidence(thermal_shots(True))) is None
    assert clock_dropped_thermal_normal(evidence(seed_shots())) is None


def test_cycle_count_caveat_fires_on_a_large_residual_and_names_the_worst():
    caveat = cycle_count_changed(evidence(first_shot_slower_shots()))
    assert caveat is not None
    assert "+20.0%" in caveat.sentence and "prefill_tok_s" in caveat.sentence
    clock_only = pd.DataFrame(
        series(COLD, [980.0] * 3, [1296.0] * 3, decode_tok_s=40.0)
        + series(WARM, [845.0] * 6, [1116.0] * 6, decode_tok_s=40.0 * 1116 / 1296)
    )
    assert cycle_count_changed(evidence(clock_only)) is None


def test_power_unreliable_caveat_fires_only_when_a_reading_was_unreliable():
    caveat = power_reading_unreliable(evidence(energy_shots()))
    assert caveat is not None
    assert "1 shot(s)" in caveat.sentence
    assert any(i.endswith("/gpu_power_median_w") for i in caveat.figure_ids)
    reliable = energy_shots().assign(gpu_power_reliable=True)
    assert power_reading_unreliable(evidence(reliable)) is None
    assert power_reading_unreliable(evidence(seed_shots())) is None


def test_cold_vs_warm_caveat_fires_whenever_cold_and_warm_are_compared():
    caveat = cold_vs_warm_compared(evidence(seed_shots()))
    assert caveat is not None
    assert "cold" in caveat.sentence and "warm" in caveat.sentence
    assert any(i.endswith("/prefill_tok_s_clock_predicted") for i in caveat.figure_ids)
    warm_only = pd.DataFrame(series(WARM, [845.0] * 6, [1116.0] * 6))
    assert cold_vs_warm_compared(evidence(warm_only)) is None


# --- registered in the figure table ---------------------------------------------------------------


def full_rows(shots: pd.DataFrame) -> pd.DataFrame:
    """The hand-made rows with every other shots.parquet column present (empty)."""
    columns = yaml.safe_load(SCHEMA.read_text())["properties"]
    frame = shots.copy()
    defaults = {"hostname": "box", "repeat": 1, "context_tokens_requested": 20480}
    for column in columns:
        if column not in frame:
            frame[column] = defaults.get(column)
    return frame


def test_compute_figures_includes_power_figures_with_unique_ids_and_caveats():
    shots = full_rows(
        pd.concat([first_shot_slower_shots(), energy_shots(other_cell(1024))], ignore_index=True)
    )
    figures, caveats = compute_figures(shots, [], RULE)
    ids = [f.figure_id for f in figures]
    assert len(ids) == len(set(ids))
    assert all(f.kind in KINDS for f in figures)
    assert f"{WARM.replace('.', '/')}/prefill_tok_s_clock_residual" in ids
    fired = {c.caveat_id for c in caveats}
    assert {"cycle_count_changed", "cold_vs_warm_compared", "power_reading_unreliable"} <= fired
    assert "clock_dropped_thermal_normal" not in fired
