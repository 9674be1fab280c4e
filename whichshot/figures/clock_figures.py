"""Seed 000's power-wall checks. Is a warm slowdown only the clock (warm ≈ cold × f_warm / f_cold)?
Did the GPU clock drop while NVML reported no thermal slowdown? Both build on the cells' own
speed and clock figures."""

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.aggregations import clock_drop_mask
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import ENGINE_MODEL, cold_sibling, group_cells, shots_in
from whichshot.figures.constants import CLOCK_DROP_FRACTION, CLOCK_ONLY_TOLERANCE
from whichshot.figures.statistic import EveryShotRule, ok_rows

# speed column -> (predicted warm speed, measured/predicted - 1, warm/cold), written out for grep.
CLOCK_CHECK_METRICS = {
    "prefill_tok_s": (
        "prefill_tok_s_clock_predicted",
        "prefill_tok_s_clock_residual",
        "prefill_tok_s_warm_cold_ratio",
    ),
    "decode_tok_s": (
        "decode_tok_s_clock_predicted",
        "decode_tok_s_clock_residual",
        "decode_tok_s_warm_cold_ratio",
    ),
}
# In order of preference: the GPU's SM clock, else the CPU's.
CLOCK_COLUMNS = ("sm_clock_median_mhz", "cpu_freq_median_mhz")
# A figure with no value whose note starts so rests on something not measured here (a nominal clock):
# a claim that would read it is not comparable here, in the note's words (claims.check).
NOT_CHECKABLE_HERE = "not checkable here"
BEST_CLOCK_METRIC = "sm_clock_best_median_mhz"
CLOCK_DROP_METRIC = "clock_drop_thermal_normal_shots"


def clock_ratio_figures(catalog: Catalog) -> list[figure.Figure]:
    """Per warm cell whose cold sibling (same cell, cold protocol) has clocks: predicted warm speed,
    its gap to the measured one, and warm / cold. Where the only clock is a CPU clock that was not
    measured (nominal), the prediction and its gap have no value and say so (not checkable here)."""
    figures = []
    for cell, rows in group_cells(catalog.shots):
        if cell["protocol"] != "warm":
            continue
        cold = cold_sibling(cell)
        clock = next((c for c in CLOCK_COLUMNS if catalog.find(cell, c) and catalog.find(cold, c)), None)
        if clock is None:
            figures += _not_checkable(catalog, cell, cold, rows)
            continue
        for speed, metrics in CLOCK_CHECK_METRICS.items():
            inputs = [
                catalog.find(cold, speed),
                catalog.find(cold, clock),
                catalog.find(cell, clock),
                catalog.find(cell, speed),
            ]
            if all(f is not None and f.value is not None for f in inputs):
                figures += _clock_check(cell, cold, inputs, metrics, _nominal_note(catalog.shots, clock))
    return figures


def _cpu_clock_not_measured(shots: pd.DataFrame) -> bool:
    """Telemetry ran on these shots and could not measure the CPU clock (only a nominal figure)."""
    return bool(shots["telemetry_not_measured"].dropna().str.contains("cpu_freq_mhz", regex=False).any())


def _not_checkable(catalog: Catalog, cell, cold, rows: pd.DataFrame) -> list[figure.Figure]:
    """The clock check without a value, where no GPU clock was read and the CPU clock was not
    measured in the warm cell or its cold sibling: the clock ratio rests on a clock nobody measured."""
    both = pd.concat([rows, shots_in(catalog.shots, cold)])
    if both["sm_clock_median_mhz"].notna().any() or not _cpu_clock_not_measured(both):
        return []
    why = (
        f"{NOT_CHECKABLE_HERE}: the CPU clock was not measured (telemetry_not_measured: cpu_freq_mhz; "
        "without cpufreq scaling_cur_freq, /proc/cpuinfo gives only the nominal clock) and no GPU clock "
        "was read, so warm ≈ cold × f_warm / f_cold cannot be checked"
    )
    # The warm shots the check would have read: those with the speed it predicts.
    return [
        figure.from_shots(
            metric,
            cell,
            catalog.rule("warm").select(rows, speed),
            "median",
            ["cpu_freq_median_mhz"],
            unit=unit,
            formula=f"{why}; with a measured clock: {words}",
            computed_by=clock_ratio_figures,
            baseline=cold,
            note=why,
        )
        for speed, (predicted, residual, _ratio) in CLOCK_CHECK_METRICS.items()
        for metric, unit, words in (
            (predicted, "tok/s", f"cold {speed} × (warm clock / cold clock)"),
            (residual, "fraction", f"measured warm {speed} / predicted warm - 1"),
        )
    ]


def _clock_check(cell, cold, inputs, metrics, note) -> list[figure.Figure]:
    cold_speed, cold_clock, warm_clock, warm_speed = inputs
    predicted_metric, residual_metric, ratio_metric = metrics
    predicted = figure.from_figures(
        predicted_metric,
        [cold_speed, cold_clock, warm_clock],
        "clock_scaled",
        unit="tok/s",
        formula=f"cold {cold_speed.metric} × (warm {warm_clock.metric} / cold {cold_clock.metric}); "
        "assumes a "
        "fixed cycle count per token, so speed scales with the clock",
        computed_by=clock_ratio_figures,
        cell=cell,
        baseline=cold,
        note=note,
    )
    residual = figure.from_figures(
        residual_metric,
        [warm_speed, predicted],
        "relative_gap",
        unit="fraction",
        formula=f"measured warm {warm_speed.metric} / predicted warm - 1; within ±{CLOCK_ONLY_TOLERANCE:.0%} "
        "(clock_only_tolerance): only the clock changed, else the cycle count changed",
        computed_by=clock_ratio_figures,
        cell=cell,
        baseline=cold,
    )
    residual.note = "; ".join(filter(None, [diagnosis(residual.value), note]))
    ratio = figure.from_figures(
        ratio_metric,
        [warm_speed, cold_speed],
        "ratio",
        unit="ratio",
        formula=f"warm {warm_speed.metric} / cold {cold_speed.metric}",
        computed_by=clock_ratio_figures,
        cell=cell,
        baseline=cold,
        note=note,
    )
    return [predicted, residual, ratio]


def diagnosis(residual: float | None) -> str:
    """The clock check's verdict in words."""
    if residual is None:
        return ""
    if abs(residual) <= CLOCK_ONLY_TOLERANCE:
        return (
            f"clock only: measured warm is within ±{CLOCK_ONLY_TOLERANCE:.0%} of cold × clock ratio "
            f"({residual:+.2%})"
        )
    if residual > 0:
        return (
            f"cycle count changed: warm is {residual:.1%} faster than the clock ratio predicts, so the "
            "cold shot did extra work (e.g. one-time first-shot work), not only a different clock"
        )
    return (
        f"cycle count changed: warm is {-residual:.1%} slower than the clock ratio predicts, so the "
        "warm shots did more work (or stalled) than the clock explains"
    )


def _nominal_note(shots: pd.DataFrame, clock: str) -> str:
    if clock != "cpu_freq_median_mhz":
        return ""
    if not shots["telemetry_fallbacks"].dropna().str.contains("cpu_freq_mhz", regex=False).any():
        return ""
    return (
        "CPU clock read from a fallback source (telemetry_fallbacks: cpu_freq_mhz): it may be a nominal "
        "value rather than the running clock, so the clock ratio may hide a real clock change"
    )


def clock_drop_figures(catalog: Catalog) -> list[figure.Figure]:
    """Per engine+model the best SM clock median; per cell the shots whose minimum SM clock fell
    more than CLOCK_DROP_FRACTION below it while NVML reported no thermal slowdown."""
    shots = catalog.shots
    if shots["sm_clock_min_mhz"].isna().all():
        return []
    figures = []
    for pair, rows in group_cells(shots, ENGINE_MODEL):
        best = figure.from_shots(
            BEST_CLOCK_METRIC,
            pair,
            EveryShotRule().select(rows, "sm_clock_median_mhz"),
            "maximum",
            ["sm_clock_median_mhz"],
            formula="highest SM clock median of any shot of this engine and model",
            computed_by=clock_drop_figures,
        )
        figures.append(best)
        for cell, cell_rows in group_cells(rows):
            selection = EveryShotRule().select(cell_rows, "sm_clock_min_mhz")
            if selection.rows.empty:
                continue
            params = {"fraction": CLOCK_DROP_FRACTION}
            figures.append(
                figure.from_shots(
                    CLOCK_DROP_METRIC,
                    cell,
                    selection,
                    "count_clock_drops",
                    ["sm_clock_min_mhz", "thermal_throttle_seen"],
                    unit="shots",
                    parameters=params,
                    inputs=[best],
                    computed_by=clock_drop_figures,
                    formula=f"shots whose minimum SM clock fell more than {CLOCK_DROP_FRACTION:.0%} "
                    f"(clock_drop_fraction) below {BEST_CLOCK_METRIC} while NVML reported no thermal "
                    "slowdown "
                    "(thermal_throttle_seen false; unknown is not counted)",
                    note=_reasons_note(selection.rows, best.value),
                )
            )
    return figures


def dropped_clock_rows(rows: pd.DataFrame, best_mhz: float | None) -> pd.DataFrame:
    """The ok shots among rows whose clock dropped with thermal normal (clock_drop_figures' count)."""
    rows = ok_rows(rows, "sm_clock_min_mhz")
    if best_mhz is None or rows.empty:
        return rows.iloc[0:0]
    return rows[
        clock_drop_mask(rows, ["sm_clock_min_mhz", "thermal_throttle_seen"], best_mhz, CLOCK_DROP_FRACTION)
    ]


def throttle_reasons(rows: pd.DataFrame) -> list[str]:
    """Distinct clock-event reasons set during any of the rows' shots, sorted."""
    return sorted({r for joined in rows["throttle_reasons_seen"].dropna() for r in joined.split("|") if r})


def _reasons_note(rows: pd.DataFrame, best_mhz: float | None) -> str:
    dropped = dropped_clock_rows(rows, best_mhz)
    if dropped.empty:
        return ""
    reasons = throttle_reasons(dropped)
    if not reasons:
        return "no clock-event reason set"
    note = "reasons set during those shots: " + ", ".join(reasons)
    if "gpu_idle" in reasons:
        note += " (gpu_idle: part of the drop may be idle time inside the shot window)"
    return note
