"""Power-wall figures (seed 000, sections 1-3): is a warm slowdown only the clock, did the clock drop
while thermals read normal, which shots are outliers, and what a token cost in energy.

Each public function takes the shots table and returns Figures. Ids follow figures.assign_ids: the
series label's parts joined by '/', then the metric.
"""

import re
import statistics
from collections.abc import Iterator

import pandas as pd

from whichshot.figures import Figure
from whichshot.stats import ROBUST_Z_THRESHOLD, WarmRule, robust_z_scores

# The seed's check: warm ≈ cold × (f_warm / f_cold) within 1-2 % means only the clock changed.
CLOCK_ONLY_TOLERANCE = 0.02
# A shot's minimum SM clock this far below the engine+model's best median counts as a drop.
CLOCK_DROP_FRACTION = 0.03
SPEED_METRICS = ("prefill_tok_s", "decode_tok_s")
# (shot column, what it is, where it comes from), in order of preference.
CLOCK_SOURCES = (
    ("sm_clock_median_mhz", "GPU SM clock", "telemetry (NVML)"),
    ("cpu_freq_median_mhz", "CPU clock", "telemetry (cpufreq)"),
)
CLOCK_DROP_METRIC = "clock_drop_thermal_normal_shots"
OUTLIER_METRIC = "outlier_shots"
ENERGY_METRIC = "gpu_energy_j_per_token"
POWER_MEDIAN_METRIC = "gpu_power_median_w"
CLOCK_COLD_METRIC = "clock_cold_mhz"
CLOCK_WARM_METRIC = "clock_warm_mhz"

# A series label: <engine>.<model>.p<tokens>.<cold | warm-rest..s-pre..s>.ctx<tokens>.<order>
_LABEL = re.compile(r"^(?P<head>.+)\.(?P<shape>cold|warm-[^.]+)\.(?P<tail>[^.]+\.[^.]+)$")


def predicted_metric(metric: str) -> str:
    return f"{metric}_clock_predicted"


def measured_warm_metric(metric: str) -> str:
    return f"{metric}_warm_measured"


def residual_metric(metric: str) -> str:
    return f"{metric}_clock_residual"


def warm_cold_ratio_metric(metric: str) -> str:
    return f"{metric}_warm_cold_ratio"


RESIDUAL_METRICS = frozenset(residual_metric(m) for m in SPEED_METRICS)
# Figures that set cold shots against warm ones.
COLD_WARM_METRICS = frozenset(
    {CLOCK_COLD_METRIC, CLOCK_WARM_METRIC}
    | {f(m) for m in SPEED_METRICS for f in (predicted_metric, residual_metric, warm_cold_ratio_metric)}
)


def power_figures(shots: pd.DataFrame, rule: WarmRule) -> list[Figure]:
    """Every figure of this module."""
    return (
        clock_ratio_figures(shots, rule)
        + thermal_normal_clock_drop_figures(shots)
        + outlier_figures(shots)
        + energy_figures(shots, rule)
    )


def cold_sibling_label(series_label: str) -> str | None:
    """The cold cell with the same engine, model, prompt length, context and order; None if unparsable."""
    match = _LABEL.match(series_label)
    if match is None:
        return None
    return f"{match['head']}.cold.{match['tail']}"


def clock_ratio_figures(shots: pd.DataFrame, rule: WarmRule) -> list[Figure]:
    """Per warm cell with a cold sibling and clocks: cold × clock ratio vs the measured warm speed."""
    ok = _ok(shots)
    cells = dict(_cells(ok))
    figures = []
    for label, warm in cells.items():
        if warm["protocol"].iloc[0] != "warm":
            continue
        cold = cells.get(cold_sibling_label(label) or "")
        if cold is None:
            continue
        cold = cold[cold["shot_index"] == 1]
        kept, described = _warm_kept(warm, rule)
        figures += _clock_ratio_cell(warm, cold, kept, described)
    return figures


def _clock_ratio_cell(warm: pd.DataFrame, cold: pd.DataFrame, kept: list[pd.DataFrame], described: str):
    kept_rows = pd.concat(kept)
    source = _clock_source(cold, kept_rows)
    if source is None:
        return []
    column, clock_name, timed_by = source
    f_cold = float(cold[column].median())
    f_warm = float(kept_rows[column].median())
    if f_cold <= 0:
        return []
    note = _nominal_clock_note(column, pd.concat([cold, kept_rows]))
    cold_ids, warm_ids = cold["shot_id"].tolist(), kept_rows["shot_id"].tolist()
    n_cold, n_warm = int(cold[column].notna().sum()), int(kept_rows[column].notna().sum())
    clocks = (
        f"f_cold = {f_cold:.0f} MHz (median {clock_name} of {n_cold} cold shots), f_warm = {f_warm:.0f} MHz "
        f"(median {clock_name} of the {n_warm} warm shots kept by the rule: {described})"
    )
    figures = [
        _figure(warm, CLOCK_COLD_METRIC, f_cold, "MHz", "derived",
                f"median {clock_name} over the cold sibling's shots (shot 1 of each fresh process)",
                cold_ids, "1 (of each fresh process)", "cold vs warm", note=note, timed_by=timed_by),
        _figure(warm, CLOCK_WARM_METRIC, f_warm, "MHz", "derived",
                f"median {clock_name} over the warm shots kept by the rule: {described}",
                warm_ids, _kept_indices(described), "cold vs warm", note=note, timed_by=timed_by),
    ]  # fmt: skip
    for metric in SPEED_METRICS:
        cold_value = _median(cold[metric])
        warm_value = _warm_value(kept, metric)
        if cold_value is None or warm_value is None or cold_value <= 0:
            continue
        figures += _clock_check(warm, metric, cold_value, warm_value, f_cold, f_warm, clocks, note,
                                (cold_ids, warm_ids, described))  # fmt: skip
    return figures


def _clock_check(warm, metric, cold_value, warm_value, f_cold, f_warm, clocks, note, inputs) -> list[Figure]:
    cold_ids, warm_ids, described = inputs
    predicted = cold_value * f_warm / f_cold
    residual = warm_value / predicted - 1
    both = cold_ids + warm_ids
    return [
        _figure(warm, predicted_metric(metric), predicted, "tok/s", "inferred",
                f"warm predicted = cold median {cold_value:.4g} tok/s × (f_warm / f_cold); {clocks}; "
                "assumes a fixed cycle count per token, so speed scales with the clock",
                both, "cold shot 1 and the warm rule's shots", "cold vs warm", note=note),
        _figure(warm, measured_warm_metric(metric), warm_value, "tok/s", "derived",
                f"{described}, median over {warm['job_id'].nunique()} series of {metric}",
                warm_ids, _kept_indices(described), "warm"),
        _figure(warm, residual_metric(metric), residual, "fraction", "inferred",
                f"measured warm {warm_value:.4g} / predicted warm {predicted:.4g} - 1; within "
                f"±{CLOCK_ONLY_TOLERANCE:.0%}: clock only, else the cycle count changed",
                both, "cold shot 1 and the warm rule's shots", "cold vs warm",
                note=_diagnosis(residual) + (f"; {note}" if note else "")),
        _figure(warm, warm_cold_ratio_metric(metric), warm_value / cold_value, "ratio", "derived",
                f"measured warm {warm_value:.4g} ({described}) / cold median {cold_value:.4g} "
                f"(shot 1 of {len(cold_ids)} fresh processes)",
                both, "cold shot 1 and the warm rule's shots", "cold vs warm", note=note),
    ]  # fmt: skip


def _diagnosis(residual: float) -> str:
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


def _clock_source(cold: pd.DataFrame, warm: pd.DataFrame) -> tuple[str, str, str] | None:
    for column, name, timed_by in CLOCK_SOURCES:
        if column in cold and column in warm and cold[column].notna().any() and warm[column].notna().any():
            return column, name, timed_by
    return None


def _nominal_clock_note(column: str, rows: pd.DataFrame) -> str:
    if column != "cpu_freq_median_mhz" or "telemetry_fallbacks" not in rows:
        return ""
    if not rows["telemetry_fallbacks"].dropna().str.contains("cpu_freq_mhz", regex=False).any():
        return ""
    return (
        "CPU clock read from a fallback source (telemetry_fallbacks: cpu_freq_mhz): it may be a nominal "
        "value rather than the running clock, so the clock ratio may hide a real clock change"
    )


def thermal_normal_clock_drop_figures(shots: pd.DataFrame) -> list[Figure]:
    """Per cell with GPU clocks: shots whose SM clock dropped while NVML reported no thermal slowdown."""
    ok = _ok(shots)
    if "sm_clock_min_mhz" not in ok or ok["sm_clock_min_mhz"].isna().all():
        return []
    best = ok.groupby(["engine", "model"])["sm_clock_median_mhz"].max()
    figures = []
    for _label, cell in _cells(ok):
        clocked = cell.dropna(subset=["sm_clock_min_mhz"])
        reference = best.get((cell["engine"].iloc[0], cell["model"].iloc[0]))
        if clocked.empty or reference is None or pd.isna(reference):
            continue
        threshold = reference * (1 - CLOCK_DROP_FRACTION)
        thermal_normal = _is(clocked["thermal_throttle_seen"], False)
        dropped = clocked[(clocked["sm_clock_min_mhz"] < threshold) & thermal_normal]
        figures.append(
            _figure(
                cell,
                CLOCK_DROP_METRIC,
                float(len(dropped)),
                "shots",
                "derived",
                f"count of the cell's {len(clocked)} shots whose minimum SM clock fell more than "
                f"{CLOCK_DROP_FRACTION:.0%} below {reference:.0f} MHz (the highest SM clock median seen "
                "for this engine and model, i.e. below "
                f"{threshold:.0f} MHz) while NVML reported no thermal slowdown (thermal_throttle_seen "
                "False; unknown is not counted)",
                dropped["shot_id"].tolist(),
                _positions(dropped),
                cell["protocol"].iloc[0],
                note=_reasons_note(dropped),
                timed_by="telemetry (NVML)",
            )  # fmt: skip
        )
    return figures


def throttle_reasons(rows: pd.DataFrame) -> list[str]:
    """Distinct clock-event reasons set during any of the rows' shots, sorted."""
    if "throttle_reasons_seen" not in rows:
        return []
    return sorted({r for joined in rows["throttle_reasons_seen"].dropna() for r in joined.split("|") if r})


def _reasons_note(dropped: pd.DataFrame) -> str:
    if dropped.empty:
        return ""
    reasons = throttle_reasons(dropped)
    if not reasons:
        return "no clock-event reason set"
    note = "reasons set during those shots: " + ", ".join(reasons)
    if "gpu_idle" in reasons:
        note += " (gpu_idle: part of the drop may be idle time inside the shot window)"
    return note


def outlier_figures(shots: pd.DataFrame) -> list[Figure]:
    """Per cell: shots whose prefill or decode |robust z| within their series exceeds the threshold."""
    ok = _ok(shots)
    figures = []
    for _label, cell in _cells(ok):
        judged, outliers, notes = False, [], []
        for _job, series in cell.groupby("job_id", sort=True):
            series = series.sort_values("series_position")
            scores = {metric: _robust_z(series[metric]) for metric in SPEED_METRICS}
            if all(z.isna().all() for z in scores.values()):
                continue
            judged = True
            decode_median = _median(series["decode_tok_s"])
            for index, row in series.iterrows():
                hits = [f"{m} z={scores[m][index]:+.1f}" for m in SPEED_METRICS
                        if abs(scores[m][index]) > ROBUST_Z_THRESHOLD]  # fmt: skip
                if hits:
                    outliers.append(row)
                    notes.append(f"{row['shot_id']}: {', '.join(hits)}; {_decode_note(row, decode_median)}")
        if not judged:
            continue
        rows = pd.DataFrame(outliers) if outliers else cell.iloc[0:0]
        figures.append(
            _figure(
                cell,
                OUTLIER_METRIC,
                float(len(outliers)),
                "shots",
                "derived",
                f"count of shots whose prefill or decode tok/s has |robust z| > {ROBUST_Z_THRESHOLD} "
                "within its series (0.6745 (x - median) / median absolute deviation; series of 5+ shots)",
                rows["shot_id"].tolist(),
                _positions(rows),
                cell["protocol"].iloc[0],
                note="; ".join(notes),
            )  # fmt: skip
        )
    return figures


def _decode_note(row: pd.Series, decode_median: float | None) -> str:
    decode = row.get("decode_tok_s")
    if decode is None or pd.isna(decode) or decode_median is None:
        return "decode not measured"
    if decode < decode_median:
        return f"decode slowed at the same time ({decode:.4g} < series median {decode_median:.4g} tok/s)"
    return f"decode did not slow ({decode:.4g} >= series median {decode_median:.4g} tok/s)"


def energy_figures(shots: pd.DataFrame, rule: WarmRule) -> list[Figure]:
    """Per cell: median J/token from energy-counter deltas, and the power median of reliable shots only."""
    ok = _ok(shots)
    if "gpu_energy_j" not in ok or ok["gpu_energy_j"].isna().all():
        return []
    figures = []
    for _label, cell in _cells(ok):
        rows, which = _protocol_rows(cell, rule)
        figures += _energy_per_token(cell, rows, which) + _power_median(cell, rows, which)
    return figures


def _energy_per_token(cell: pd.DataFrame, rows: pd.DataFrame, which: str) -> list[Figure]:
    measured = rows.dropna(subset=["gpu_energy_j"])
    per_token = measured["energy_j_per_token"].dropna()
    if per_token.empty:
        return []
    shots = measured.loc[per_token.index]
    return [
        _figure(
            cell,
            ENERGY_METRIC,
            float(per_token.median()),
            "J/token",
            "derived",
            f"median over {len(per_token)} shots ({which}) of the GPU energy-counter delta over the "
            "whole shot (prefill and decode) / output tokens",
            shots["shot_id"].tolist(),
            _positions(shots),
            cell["protocol"].iloc[0],
            timed_by="telemetry (NVML energy counter)",
        )  # fmt: skip
    ]


def _power_median(cell: pd.DataFrame, rows: pd.DataFrame, which: str) -> list[Figure]:
    if "gpu_power_median_w" not in rows or "gpu_power_reliable" not in rows:
        return []
    read = rows.dropna(subset=["gpu_power_median_w"])
    reliable = read[_is(read["gpu_power_reliable"], True)]
    if reliable.empty:
        return []
    left_out = len(read) - len(reliable)
    return [
        _figure(
            cell,
            POWER_MEDIAN_METRIC,
            float(reliable["gpu_power_median_w"].median()),
            "W",
            "derived",
            f"median over {len(reliable)} shots ({which}) of each shot's median NVML power reading; "
            f"{left_out} shot(s) with an unreliable reading (shorter than NVML's trailing average) "
            "left out",
            reliable["shot_id"].tolist(),
            _positions(reliable),
            cell["protocol"].iloc[0],
            timed_by="telemetry (NVML)",
        )  # fmt: skip
    ]


# --- helpers ---------------------------------------------------------------------------------------


def _ok(shots: pd.DataFrame) -> pd.DataFrame:
    return shots[shots["status"] == "ok"]


def _cells(ok: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    yield from ok.groupby("series_label", sort=False)


def _warm_kept(warm: pd.DataFrame, rule: WarmRule) -> tuple[list[pd.DataFrame], str]:
    """Per series, the rows the warm rule keeps (as warm_statistic picks them), and the rule in words."""
    kept, described = [], ""
    for _job, series in warm.groupby("job_id", sort=True):
        series = series.sort_values("series_position")
        kept.append(series.iloc[[i - 1 for i in rule.shot_indices(len(series))]])
        described = rule.describe(len(series))
    return kept, described


def _warm_value(kept: list[pd.DataFrame], metric: str) -> float | None:
    """Median over series of the median of each series' kept shots (figures._warm_figure's statistic)."""
    per_series = [v for rows in kept if (v := _median(rows[metric])) is not None]
    return statistics.median(per_series) if per_series else None


def _protocol_rows(cell: pd.DataFrame, rule: WarmRule) -> tuple[pd.DataFrame, str]:
    """The shots a cell's speed figures use: cold shot 1s, or the warm rule's shots."""
    if cell["protocol"].iloc[0] == "cold":
        return cell[cell["shot_index"] == 1], "shot 1 of each fresh process"
    kept, described = _warm_kept(cell, rule)
    return pd.concat(kept), described


def _median(values: pd.Series) -> float | None:
    present = values.dropna()
    return float(present.median()) if len(present) else None


def _robust_z(values: pd.Series) -> pd.Series:
    """Robust z per row (NaN where undefined), computed over the rows that have a value."""
    present = values.dropna()
    scores = robust_z_scores(present.tolist())
    return pd.Series([float("nan") if z is None else z for z in scores], index=present.index).reindex(
        values.index
    )


def _is(flags: pd.Series, wanted: bool) -> pd.Series:
    """Rows whose flag is exactly `wanted` (missing never matches)."""
    return flags.map(lambda v: v is not None and not pd.isna(v) and bool(v) is wanted).astype(bool)


def _positions(rows: pd.DataFrame) -> str:
    return ", ".join(str(int(p)) for p in rows["series_position"]) if len(rows) else ""


def _kept_indices(described: str) -> str:
    return described.split("(")[-1].rstrip(")")


def _figure(cell: pd.DataFrame, metric, value, unit, kind, formula, shot_ids, shot_indices, protocol,
            note: str = "", timed_by: str = "whichshot client") -> Figure:  # fmt: skip
    first = cell.iloc[0]
    label = first["series_label"]
    return Figure(
        figure_id="/".join([*label.split("."), metric]),
        value=value,
        unit=unit,
        kind=kind,
        formula=formula,
        engine=first["engine"],
        model=first["model"],
        prompt_tokens=int(first["prompt_tokens"]),
        protocol=protocol,
        metric=metric,
        shot_ids=list(shot_ids),
        shot_indices=shot_indices,
        rest_s=None if pd.isna(first.get("rest_s")) else float(first.get("rest_s")),
        series_label=label,
        note=note,
        timed_by=timed_by,
    )
