"""Seed 000's power-wall figures on hand-made shots: the clock-ratio check, clock drops with thermals
normal, outliers, energy and power, and the caveats they fire."""

import pytest

from tests.shot_tables import cell, series, table
from whichshot.figures.clock_figures import diagnosis
from whichshot.figures.table import compute_figures

WARM = cell(prompt_tokens_requested=4096)
COLD = cell(prompt_tokens_requested=4096, protocol="cold")


def by_id(figures) -> dict:
    return {f.figure_id: f for f in figures}


def find(figures, metric: str, protocol: str = "warm"):
    (found,) = [
        f
        for f in figures
        if f.metric == metric and f.axes.get("protocol") == protocol and f.shot_index is None
    ]
    return found


def clocked(prefill: list[float], clocks: list[float], decode: float = 40.0) -> list[dict]:
    return [
        {
            "prefill_tok_s": p,
            "decode_tok_s": decode,
            "sm_clock_median_mhz": c,
            "sm_clock_min_mhz": c,
            "thermal_throttle_seen": False,
            "throttle_reasons_seen": "",
        }
        for p, c in zip(prefill, clocks, strict=True)
    ]


def seed_shots():
    """The seed's numbers: cold 980 tok/s at 1296 MHz; warm ~845 at 1116 MHz from shot 3 on."""
    cold = series(COLD, clocked([979.0, 980.0, 982.0], [1296.0] * 3))
    warm = series(
        WARM,
        clocked([980.0, 900.0, 845.0, 844.0, 846.0, 845.0], [1296.0, 1200.0, 1116.0, 1116.0, 1115.0, 1117.0]),
    )
    return table(cold, warm)


def test_clock_ratio_reproduces_the_seed_arithmetic():
    figures, _caveats = compute_figures(seed_shots(), [], 0.7)
    predicted = find(figures, "prefill_tok_s_clock_predicted")
    assert predicted.value == pytest.approx(980 * 1116 / 1296)
    assert round(predicted.value, 1) == 843.9
    assert predicted.kind == "inferred"
    cold_clock, warm_clock = (by_id(figures)[i] for i in predicted.input_figure_ids[1:])
    assert (cold_clock.value, warm_clock.value) == (1296.0, 1116.0)
    assert warm_clock.shot_indices == "3-6"
    residual = find(figures, "prefill_tok_s_clock_residual")
    assert residual.value == pytest.approx(845 / (980 * 1116 / 1296) - 1)
    assert residual.kind == "inferred" and residual.note.startswith("clock only")
    ratio = find(figures, "prefill_tok_s_warm_cold_ratio")
    assert ratio.value == pytest.approx(845 / 980) and ratio.kind == "derived"
    # the prediction cites exactly the cold shot 1s and the warm rule's shots 3-6
    cited = {s.rsplit("/", 1)[1] for s in predicted.shot_ids if "warm" in s}
    assert cited == {"shot3", "shot4", "shot5", "shot6"}
    # decode did not change although the clock dropped: the check says so
    assert find(figures, "decode_tok_s_clock_residual").note.startswith("cycle count changed")


def test_first_shot_slower_at_equal_clocks_is_a_cycle_count_change():
    shots = table(
        series(COLD, clocked([800.0] * 3, [1800.0] * 3)),
        series(WARM, clocked([800.0, 960, 960, 960, 960, 960], [1800.0] * 6)),
    )
    figures, caveats = compute_figures(shots, [], 0.7)
    residual = find(figures, "prefill_tok_s_clock_residual")
    assert residual.value == pytest.approx(0.2)
    assert "faster" in diagnosis(residual.value)
    fired = {c["caveat_id"]: c for c in caveats}
    assert residual.figure_id in fired["cycle_count_changed"]["figure_ids"]
    # a figure of one protocol alone does not compare cold with warm: it carries neither caveat
    decode = find(figures, "decode_tok_s")
    assert "cycle_count_changed" not in decode.caveat_ids and "cold_vs_warm_compared" not in decode.caveat_ids


def test_clock_ratio_falls_back_to_the_cpu_clock_and_says_it_may_be_nominal():
    fallback = "cpu_freq_mhz: using 'cpu MHz' from /proc/cpuinfo"
    values = {"prefill_tok_s": 100.0, "cpu_freq_median_mhz": 2445.0, "telemetry_fallbacks": fallback}
    shots = table(series(COLD, [values] * 3), series(WARM, [values] * 6))
    figures, caveats = compute_figures(shots, [], 0.7)
    assert "nominal" in find(figures, "prefill_tok_s_clock_predicted").note
    fallback_caveat = next(c for c in caveats if c["caveat_id"] == "sensor_fallback")
    cpu_clock = find(figures, "cpu_freq_median_mhz")
    assert cpu_clock.figure_id in fallback_caveat["figure_ids"]
    assert find(figures, "ttft_s").figure_id not in fallback_caveat["figure_ids"]  # a client timer


def test_clock_drop_with_thermal_normal_is_counted_with_its_reasons():
    rows = [
        {
            "sm_clock_median_mhz": 1980.0,
            "sm_clock_min_mhz": 1975.0,
            "throttle_reasons_seen": "",
            "thermal_throttle_seen": False,
        },
        {
            "sm_clock_median_mhz": 1800.0,
            "sm_clock_min_mhz": 1500.0,
            "throttle_reasons_seen": "sw_power_cap",
            "thermal_throttle_seen": False,
        },
        {
            "sm_clock_median_mhz": 1800.0,
            "sm_clock_min_mhz": 1500.0,
            "throttle_reasons_seen": "sw_thermal_slowdown",
            "thermal_throttle_seen": True,
        },
    ]
    figures, caveats = compute_figures(table(series(WARM, rows)), [], 0.7)
    drops = find(figures, "clock_drop_thermal_normal_shots")
    assert drops.value == 1 and drops.unit == "shots" and drops.kind == "derived"
    assert "sw_power_cap" in drops.note
    assert len(drops.shot_ids) == 3  # every shot it examined, not only the one it counted
    caveat = next(c for c in caveats if c["caveat_id"] == "clock_dropped_thermal_normal")
    assert caveat["shot_ids"] == [drops.shot_ids[1]] and drops.figure_id in caveat["figure_ids"]


def test_zero_clock_drops_still_cite_the_shots_examined():
    rows = [{"sm_clock_median_mhz": 1980.0, "sm_clock_min_mhz": 1975.0, "thermal_throttle_seen": False}] * 4
    figures, caveats = compute_figures(table(series(WARM, rows)), [], 0.7)
    drops = find(figures, "clock_drop_thermal_normal_shots")
    assert drops.value == 0 and len(drops.shot_ids) == 4
    assert "clock_dropped_thermal_normal" not in {c["caveat_id"] for c in caveats}


def test_outliers_are_counted_over_every_shot_examined_and_caveated():
    prefill = [100.0, 101.0, 99.0, 100.5, 99.5, 60.0]
    decode = [50.0, 50.5, 49.5, 50.2, 49.8, 49.0]
    rows = [{"prefill_tok_s": p, "decode_tok_s": d} for p, d in zip(prefill, decode, strict=True)]
    figures, caveats = compute_figures(table(series(WARM, rows)), [], 0.7)
    outliers = find(figures, "outlier_shots")
    assert outliers.value == 1 and len(outliers.shot_ids) == 6
    assert "decode slowed at the same time" in outliers.note
    caveat = next(c for c in caveats if c["caveat_id"] == "outliers_present")
    assert caveat["shot_ids"] == [outliers.shot_ids[5]]
    # the warm figure uses shots 3-6, among them the outlier: it carries the caveat
    assert "outliers_present" in find(figures, "prefill_tok_s").caveat_ids
    clean = [{"prefill_tok_s": p, "decode_tok_s": 50.0} for p in (100.0, 101.0, 99.0, 100.5, 99.5, 100.2)]
    figures, caveats = compute_figures(table(series(WARM, clean)), [], 0.7)
    assert find(figures, "outlier_shots").value == 0
    assert "outliers_present" not in {c["caveat_id"] for c in caveats}
