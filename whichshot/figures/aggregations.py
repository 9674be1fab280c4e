"""How a figure's value is computed from what it cites: one named function per way.

A figure row names its aggregation, the shot columns it reads, its parameters and the figures it
is arithmetic on; `recompute` runs the same function on exactly the cited shots (and input
figures), so any figure can be checked from shots.parquet alone.
"""

import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from whichshot.figures.statistic import WarmRule, outlier_flags
from whichshot.figures.steady_state import TOO_FEW_SHOTS, series_classes
from whichshot.figures.verdict import (
    LEVEL,
    paired_ratio_interval,
    paired_ratio_range,
    paired_values,
    process_values,
    ratio_interval,
    ratio_range,
    verdict_code,
)
from whichshot.measure.settle import spread as slowest_over_fastest


@dataclass(frozen=True)
class Aggregation:
    """One way to compute a value, and what its provenance kind follows from."""

    name: str
    inputs: str  # "shots": the cited shots; "figures": the input figures; "source": not shots; "constant"
    compute: Callable[..., float | None]
    picks_one_value: bool = False  # over one shot, the value is that shot's (the column's kind)
    rests_on_a_model: bool = False  # the value is a prediction of a model of the system: inferred
    measured_by_us: bool = False  # a source we ran ourselves (the hardware probe): measured


def _values(rows: pd.DataFrame, column: str) -> list[float]:
    return [float(v) for v in rows[column].dropna()]


def median(rows: pd.DataFrame, columns: Sequence[str], params: Mapping[str, Any], inputs=()) -> float | None:
    values = _values(rows, columns[0])
    return statistics.median(values) if values else None


def median_of_series_medians(rows, columns, params, inputs=()) -> float | None:
    per_series = [
        m
        for _job, series in rows.groupby("job_id", sort=False)
        if (m := median(series, columns, params)) is not None
    ]
    return statistics.median(per_series) if per_series else None


def maximum(rows, columns, params, inputs=()) -> float | None:
    values = _values(rows, columns[0])
    return max(values) if values else None


def minimum(rows, columns, params, inputs=()) -> float | None:
    values = _values(rows, columns[0])
    return min(values) if values else None


def _process_sides(rows: pd.DataFrame, column: str, params: Mapping[str, Any]) -> tuple[tuple, tuple]:
    """Each side's per-process values (rows of both cells, told apart by params['side_axis'])."""
    axis = params["side_axis"]
    side, reference = (rows[rows[axis] == params[which]] for which in ("side", "reference"))
    return process_values(side, column), process_values(reference, column)


def _as_asked(value: float | None, params: Mapping[str, Any]) -> float | None:
    """A ratio, or the relative delta (ratio - 1) where params['less_one']."""
    return None if value is None else value - 1 if params.get("less_one") else value


def process_ratio(rows, columns, params, inputs=()) -> float | None:
    """The ratio of the sides' geometric means over their processes (figures.verdict)."""
    side, reference = _process_sides(rows, columns[0], params)
    if not side or not reference or min(*side, *reference) <= 0:
        return None
    logs = statistics.fmean(math.log(v) for v in side) - statistics.fmean(math.log(v) for v in reference)
    return _as_asked(math.exp(logs), params)


def process_ratio_low(rows, columns, params, inputs=()) -> float | None:
    interval = ratio_interval(*_process_sides(rows, columns[0], params))
    return None if interval is None else _as_asked(interval.low, params)


def process_ratio_high(rows, columns, params, inputs=()) -> float | None:
    interval = ratio_interval(*_process_sides(rows, columns[0], params))
    return None if interval is None else _as_asked(interval.high, params)


def process_ratio_min(rows, columns, params, inputs=()) -> float | None:
    span = ratio_range(*_process_sides(rows, columns[0], params))
    return None if span is None else _as_asked(span[0], params)


def process_ratio_max(rows, columns, params, inputs=()) -> float | None:
    span = ratio_range(*_process_sides(rows, columns[0], params))
    return None if span is None else _as_asked(span[1], params)


def paired_ratio(rows, columns, params, inputs=()) -> float | None:
    """Shot 1 over the kept warm shots, paired per process: the geometric mean of the processes'
    ratios (figures.verdict)."""
    firsts, warms = paired_values(rows, columns[0])
    if not firsts or min(*firsts, *warms) <= 0:
        return None
    logs = statistics.fmean(math.log(f) - math.log(w) for f, w in zip(firsts, warms, strict=True))
    return _as_asked(math.exp(logs), params)


def paired_ratio_low(rows, columns, params, inputs=()) -> float | None:
    interval = paired_ratio_interval(*paired_values(rows, columns[0]), params.get("level", LEVEL))
    return None if interval is None else _as_asked(interval.low, params)


def paired_ratio_high(rows, columns, params, inputs=()) -> float | None:
    interval = paired_ratio_interval(*paired_values(rows, columns[0]), params.get("level", LEVEL))
    return None if interval is None else _as_asked(interval.high, params)


def paired_ratio_min(rows, columns, params, inputs=()) -> float | None:
    span = paired_ratio_range(*paired_values(rows, columns[0]))
    return None if span is None else _as_asked(span[0], params)


def paired_ratio_max(rows, columns, params, inputs=()) -> float | None:
    span = paired_ratio_range(*paired_values(rows, columns[0]))
    return None if span is None else _as_asked(span[1], params)


def count_steady_state(rows, columns, params, inputs=()) -> float | None:
    """How many warm series (processes) of the cited warm shots fall in params['class']
    (figures.steady_state); none without a series that could be classified."""
    classes = series_classes(rows, columns[0], WarmRule(params["fraction"]).keep, params["margin"])
    counted = [c for c in classes.values() if c != TOO_FEW_SHOTS]
    return float(sum(c == params["class"] for c in counted)) if counted else None


def lowest_process(rows, columns, params, inputs=()) -> float | None:
    """The lowest per-process value (a process's value: the median of its rows)."""
    values = process_values(rows, columns[0])
    return min(values) if values else None


def highest_process(rows, columns, params, inputs=()) -> float | None:
    values = process_values(rows, columns[0])
    return max(values) if values else None


def verdict(values, params) -> float | None:
    """(low, high) of an interval -> its verdict code (figures.verdict), on relative deltas."""
    low, high = values
    if low is None or high is None:
        return None
    offset = 0.0 if params["less_one"] else 1.0
    return verdict_code(low - offset, high - offset, params["margin"])


def ratio_of_sums(rows, columns, params, inputs=()) -> float | None:
    """Summed numerator over summed denominator; where both summed to 0 over counted rows, the
    parameter "both_zero" where given (a drafter that drafted nothing accepted 0 %), else none."""
    numerator, denominator = (rows[c].fillna(0).sum() for c in columns)
    if denominator > 0:
        return float(numerator / denominator)
    return params.get("both_zero") if len(rows) and denominator == 0 and numerator == 0 else None


def median_of_ratios(rows, columns, params, inputs=()) -> float | None:
    both = rows.dropna(subset=list(columns))
    both = both[both[columns[1]] != 0]
    ratios = (both[columns[0]] / both[columns[1]]).tolist()
    return statistics.median(ratios) if ratios else None


def share_true(rows, columns, params, inputs=()) -> float | None:
    values = rows[columns[0]].dropna()
    return float(values.astype(bool).mean()) if len(values) else None


def count_rows(rows, columns, params, inputs=()) -> float | None:
    """How many of the cited shots are ok (a cell's completeness)."""
    return float((rows["status"] == "ok").sum())


def count_outliers(rows, columns, params, inputs=()) -> float | None:
    """Shots whose value in any column has |robust z| above the threshold within their series."""
    flagged = outlier_mask(rows, columns, params["threshold"])
    return float(flagged.sum())


def outlier_mask(rows: pd.DataFrame, columns: Sequence[str], threshold: float) -> pd.Series:
    """Per row: an outlier of its own series (job) in any of the columns."""
    mask = pd.Series(False, index=rows.index)
    for _job, series in rows.groupby("job_id", sort=False):
        for column in columns:
            present = series[column].dropna()
            flags = outlier_flags([float(v) for v in present], threshold)
            mask.loc[present.index[[i for i, f in enumerate(flags) if f]]] = True
    return mask


def count_clock_drops(rows, columns, params, inputs=()) -> float | None:
    """Shots whose minimum clock fell more than `fraction` below the reference (the input figure)
    while thermal slowdown was reported false (unknown is not counted)."""
    reference_mhz = inputs[0]
    if reference_mhz is None:
        return None
    return float(clock_drop_mask(rows, columns, reference_mhz, params["fraction"]).sum())


def clock_drop_mask(rows: pd.DataFrame, columns: Sequence[str], reference_mhz: float, fraction: float):
    clock_min, thermal = columns
    dropped = rows[clock_min] < reference_mhz * (1 - fraction)
    thermal_normal = rows[thermal].map(lambda v: v is not None and not pd.isna(v) and not bool(v))
    return (dropped & thermal_normal.astype(bool)).fillna(False)


def paired_share_equal(rows, columns, params, inputs=()) -> float | None:
    """Share of shot pairs (same repeat and series position, one per side) whose first column is
    equal, counting only pairs whose second column (the input) is equal too."""
    value, same_input = columns
    side, reference = params["side"], params["reference"]
    ours = rows[rows[params["side_axis"]] == side].set_index(["repeat", "series_position"])
    theirs = rows[rows[params["side_axis"]] == reference].set_index(["repeat", "series_position"])
    pairs = ours.join(theirs, how="inner", suffixes=("", "_ref"))
    pairs = pairs[pairs[same_input] == pairs[f"{same_input}_ref"]]
    return float((pairs[value] == pairs[f"{value}_ref"]).mean()) if len(pairs) else None


def count_requests(rows, columns, params, inputs=()) -> float | None:
    """Distinct requests among the cited shots with the given status."""
    request, status = columns
    return float(rows.loc[rows[status] == params["status"], request].nunique())


def _groups(values: Sequence[float | None], size: int) -> list[tuple]:
    return [tuple(values[i : i + size]) for i in range(0, len(values), size)]


def output_weighted_mean(values, params) -> float | None:
    """(out, x) pairs -> sum(out x) / sum(out)."""
    pairs = _groups(values, 2)
    total = sum(out for out, _ in pairs)
    return sum(out * x for out, x in pairs) / total if total else None


def _decode_seconds(values) -> tuple[float, float]:
    """(out, v0, v1) triples -> (sum out / v0, sum out / v1): the mix's decode time without and with."""
    triples = _groups(values, 3)
    return sum(out / v0 for out, v0, _ in triples), sum(out / v1 for out, _, v1 in triples)


def output_weighted_speedup(values, params) -> float | None:
    without, with_drafts = _decode_seconds(values)
    return without / with_drafts if with_drafts else None


def output_weighted_time_saved(values, params) -> float | None:
    without, with_drafts = _decode_seconds(values)
    return without - with_drafts


def probe_best(values, params) -> float | None:
    """Our probe's work over its fastest repetition (a peak: the best the machine showed)."""
    return params["work"] / min(params["samples_s"]) if params["samples_s"] else None


def _medians(rows: pd.DataFrame, columns: Sequence[str]) -> list[float | None]:
    return [median(rows, [column], {}) for column in columns]


def decode_ceiling(rows, columns, params, inputs=()) -> float | None:
    """bandwidth / (weight bytes + KV bytes per context token x (prompt + output / 2))."""
    bandwidth, weight_bytes, kv_bytes = inputs
    prompt, output = _medians(rows, columns)
    if None in (bandwidth, weight_bytes, kv_bytes, prompt, output):
        return None
    return bandwidth / (weight_bytes + kv_bytes * (prompt + output / 2))


def prefill_ceiling(rows, columns, params, inputs=()) -> float | None:
    """compute / (2 x parameters per prompt token + attention FLOPs per context token x prompt / 2)."""
    compute, parameters, attention = inputs
    (prompt,) = _medians(rows, columns)
    if None in (compute, parameters, attention, prompt):
        return None
    return compute / (2 * parameters + attention * prompt / 2)


def harmonic_mix(values, params) -> float | None:
    """The peak of mixed work: total weight / sum of (each part's weight / its own peak)."""
    weights = params["weights"]
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return sum(weights) / sum(w / v for w, v in zip(weights, values, strict=True))


def dram_bytes_moved(rows, columns, params, inputs=()) -> float | None:
    """peak bandwidth x the median over shots of (DRAM utilisation % / 100 x seconds)."""
    (peak,) = inputs
    utilisation, seconds = columns
    shares = (pd.to_numeric(rows[utilisation]) / 100 * pd.to_numeric(rows[seconds])).dropna()
    return None if peak is None or shares.empty else float(shares.median()) * peak


def ratio(values: Sequence[float | None], params) -> float | None:
    top, bottom = values
    return None if top is None or not bottom else top / bottom


def highest_input(values, params) -> float | None:
    """The highest of the input figures' values (the best of several modes)."""
    present = [v for v in values if v is not None]
    return max(present) if present else None


def count_passing(values, params) -> float | None:
    """How many of the inputs params['passing'] marks as passing (the best-mode count)."""
    return float(sum(bool(p) for p in params["passing"]))


def clock_scaled(values, params) -> float | None:
    """speed × (f_warm / f_cold): the speed a changed clock alone would give."""
    speed, f_cold, f_warm = values
    return None if None in (speed, f_cold, f_warm) or not f_cold else speed * f_warm / f_cold


def relative_gap(values, params) -> float | None:
    """measured / predicted - 1."""
    measured, predicted = values
    return None if measured is None or not predicted else measured / predicted - 1


def given(values, params) -> float | None:
    """A value taken as it is: another tool's number, or a constant of ours."""
    return params["value"]


def samples_mean(values, params) -> float | None:
    """The mean of another tool's samples (every repetition it printed)."""
    return statistics.fmean(params["samples"]) if params["samples"] else None


def samples_lowest(values, params) -> float | None:
    return min(params["samples"], default=None)


def samples_highest(values, params) -> float | None:
    return max(params["samples"], default=None)


def lowest_over_input(rows, columns, params, inputs=()) -> float | None:
    """The cited shots' lowest value over the input figure's (one end of a ratio's range)."""
    values = _values(rows, columns[0])
    return min(values) / inputs[0] if values and inputs and inputs[0] else None


def highest_over_input(rows, columns, params, inputs=()) -> float | None:
    """The cited shots' highest value over the input figure's (the other end)."""
    values = _values(rows, columns[0])
    return max(values) / inputs[0] if values and inputs and inputs[0] else None


def verify_cost_ratio(values, params) -> float | None:
    """Seconds of one step over a batch of `width` tokens / of one token, from the tool's tok/s
    samples at each width: (width / mean wide tok/s) / (1 / mean one-token tok/s)."""
    one, wide = params["samples_one_tok_s"], params["samples_wide_tok_s"]
    if not one or not wide:
        return None
    return params["width"] * statistics.fmean(one) / statistics.fmean(wide)


def samples_median(values, params) -> float | None:
    """The median of another tool's samples (the probe's per-request medians)."""
    return statistics.median(params["samples"]) if params["samples"] else None


def step_ratio(values, params) -> float | None:
    """A step's time over the one-token step's: the medians of their per-request samples (ms)."""
    wide, one = params["samples_ms"], params["one_token_samples_ms"]
    return statistics.median(wide) / statistics.median(one) if wide and one else None


def largest_spread(values, params) -> float | None:
    """The largest slowest-over-fastest among the repetitions of each point a probe timed."""
    spreads = [slowest_over_fastest(samples) for samples in params["samples_ms_by_point"].values()]
    return max((s for s in spreads if s is not None), default=None)


def _verify_steps(row: pd.Series) -> float | None:
    """A shot's verification steps that had a draft: accepted / (mean len - 1), the engine's mean
    length being (accepted + steps) / steps; else the server's drafts counter; none drafted: 0."""
    if not row["engine_draft_tokens"]:
        return 0.0
    mean_len = row["engine_draft_mean_len"]
    if pd.notna(mean_len) and mean_len > 1:
        return round(row["engine_draft_accepted"] / (mean_len - 1))
    drafts = row["server_spec_drafts_delta"]
    return float(drafts) if pd.notna(drafts) else None


@dataclass(frozen=True)
class DecodeSteps:
    """A drafted cell's decode, summed over its shots: tokens decoded after the first (it came with
    the prefill), steps that drafted nothing, verification steps and their draft and accepted tokens."""

    decoded: float
    plain: float
    verify: float
    drafted: float
    accepted: float

    @property
    def mean_draft(self) -> float:
        return self.drafted / self.verify

    @property
    def mean_accepted(self) -> float:
        return self.accepted / self.verify

    def speedup(self, verify_step_ratio: float) -> float:
        """Decoded tokens over the steps' time in one-token steps: plain + verify x the ratio."""
        return self.decoded / (self.plain + self.verify * verify_step_ratio)


def decode_steps(rows: pd.DataFrame) -> DecodeSteps | None:
    """The shots' decode steps from the engine's counts (None where a shot's steps are unknown)."""
    needed = rows.dropna(subset=["output_tokens", "engine_draft_tokens", "engine_draft_accepted"])
    steps = [_verify_steps(row) for _, row in needed.iterrows()]
    if needed.empty or None in steps:
        return None
    decoded = float((needed["output_tokens"] - 1).sum())
    accepted, verify = float(needed["engine_draft_accepted"].sum()), float(sum(steps))
    return DecodeSteps(
        decoded, decoded - accepted - verify, verify, float(needed["engine_draft_tokens"].sum()), accepted
    )


def speculative_speedup(rows, columns, params, inputs=()) -> float | None:
    """The kernel-only model of runs before the server's verify probe (their committed figures
    recompute with it): decode tokens / (plain steps + verify steps x r), r = t(k+1)/t(1) from
    llama-bench interpolated linearly from 1 at one token to the measured ratio at the cap's width,
    at the cell's mean draft k."""
    (ratio_at_cap,) = inputs
    steps = decode_steps(rows)
    if ratio_at_cap is None or steps is None:
        return None
    if steps.verify == 0:
        return 1.0
    return steps.speedup(1 + (ratio_at_cap - 1) * steps.mean_draft / params["cap"])


def server_step_model(rows, columns, params, inputs=()) -> float | None:
    """The cost model on the server's own step times (measure/verify_probe.py), at the cell's mean
    draft k and mean accepted a per verification step: a step costs none(k) + a x token(k) one-token
    steps, none(k) the step that accepts no draft (linear between the widths timed, 1 at k = 0) and
    token(k) each accepted token's cost, (all(w) - none(w)) / (w - 1) at each width w = k + 1 timed.
    params["output"]: the speed-up (decoded / (plain + verify x step)), or the step's kernel share
    (none(k) / step) or per-token share (a x token(k) / step). None where a probe's repetitions
    spread more than params["spread_limit"] (inputs: that spread, then none(w), then all(w), then
    where params["drafter"] the series' drafter's plain step d: every step costs d - 1 more one-token
    steps, its host-side lookup; output "drafter_share" is that over the verification step)."""
    spread, *ratios = inputs
    widths = params["widths"]
    nones, alls = ratios[: len(widths)], ratios[len(widths) : 2 * len(widths)]
    steps = decode_steps(rows)
    if steps is None or spread is None or spread > params["spread_limit"] or None in ratios:
        return None
    lookup = ratios[-1] - 1 if params.get("drafter") else 0.0
    if steps.verify == 0:
        return 1.0 / (1 + lookup) if params["output"] == "speedup" else None
    drafts = [w - 1 for w in widths]
    kernel = float(np.interp(steps.mean_draft, [0, *drafts], [1.0, *nones]))
    per_token = [(a - n) / k for a, n, k in zip(alls, nones, drafts, strict=True)]
    token = float(np.interp(steps.mean_draft, drafts, per_token))
    step = kernel + steps.mean_accepted * token + lookup
    speedup = steps.decoded / (steps.plain * (1 + lookup) + steps.verify * step)
    shares = {"kernel_share": kernel, "token_share": steps.mean_accepted * token, "drafter_share": lookup}
    return speedup if params["output"] == "speedup" else shares[params["output"]] / step


AGGREGATIONS = {
    a.name: a
    for a in (
        Aggregation("median", "shots", median, picks_one_value=True),
        Aggregation("median_of_series_medians", "shots", median_of_series_medians, picks_one_value=True),
        Aggregation("maximum", "shots", maximum, picks_one_value=True),
        Aggregation("minimum", "shots", minimum, picks_one_value=True),
        Aggregation("lowest_process", "shots", lowest_process, picks_one_value=True),
        Aggregation("highest_process", "shots", highest_process, picks_one_value=True),
        Aggregation("process_ratio", "shots", process_ratio),
        Aggregation("process_ratio_low", "shots", process_ratio_low),
        Aggregation("process_ratio_high", "shots", process_ratio_high),
        Aggregation("process_ratio_min", "shots", process_ratio_min),
        Aggregation("process_ratio_max", "shots", process_ratio_max),
        Aggregation("paired_ratio", "shots", paired_ratio),
        Aggregation("paired_ratio_low", "shots", paired_ratio_low),
        Aggregation("paired_ratio_high", "shots", paired_ratio_high),
        Aggregation("paired_ratio_min", "shots", paired_ratio_min),
        Aggregation("paired_ratio_max", "shots", paired_ratio_max),
        Aggregation("count_steady_state", "shots", count_steady_state),
        Aggregation("verdict", "figures", verdict),
        Aggregation("highest_input", "figures", highest_input),
        Aggregation("count_passing", "figures", count_passing),
        Aggregation("ratio_of_sums", "shots", ratio_of_sums),
        Aggregation("median_of_ratios", "shots", median_of_ratios),
        Aggregation("share_true", "shots", share_true),
        Aggregation("count_rows", "shots", count_rows),
        Aggregation("count_outliers", "shots", count_outliers),
        Aggregation("count_clock_drops", "shots", count_clock_drops),
        Aggregation("paired_share_equal", "shots", paired_share_equal),
        Aggregation("count_requests", "shots", count_requests),
        Aggregation("output_weighted_mean", "figures", output_weighted_mean),
        Aggregation("output_weighted_speedup", "figures", output_weighted_speedup),
        Aggregation("output_weighted_time_saved", "figures", output_weighted_time_saved),
        Aggregation("probe_best", "source", probe_best, measured_by_us=True),
        Aggregation("model_file_fact", "source", given),
        Aggregation("decode_ceiling", "shots", decode_ceiling, rests_on_a_model=True),
        Aggregation("prefill_ceiling", "shots", prefill_ceiling, rests_on_a_model=True),
        Aggregation("harmonic_mix", "figures", harmonic_mix),
        Aggregation("dram_bytes_moved", "shots", dram_bytes_moved, rests_on_a_model=True),
        Aggregation("ratio", "figures", ratio),
        Aggregation("verify_cost_ratio", "source", verify_cost_ratio),
        Aggregation("speculative_speedup", "shots", speculative_speedup, rests_on_a_model=True),
        Aggregation("server_step_model", "shots", server_step_model, rests_on_a_model=True),
        Aggregation("tool_samples_median", "source", samples_median),
        Aggregation("step_ratio", "source", step_ratio),
        Aggregation("largest_spread", "source", largest_spread),
        Aggregation("clock_scaled", "figures", clock_scaled, rests_on_a_model=True),
        Aggregation("relative_gap", "figures", relative_gap),
        Aggregation("lowest_over_input", "shots", lowest_over_input),
        Aggregation("highest_over_input", "shots", highest_over_input),
        Aggregation("reported_by_another_tool", "source", given, picks_one_value=True),
        Aggregation("tool_samples_mean", "source", samples_mean),
        Aggregation("tool_samples_lowest", "source", samples_lowest, picks_one_value=True),
        Aggregation("tool_samples_highest", "source", samples_highest, picks_one_value=True),
        Aggregation("constant", "constant", given),
    )
}


def compute(
    name: str,
    rows: pd.DataFrame | None,
    columns: Sequence[str],
    params: Mapping[str, Any],
    input_values: Sequence[float | None] = (),
) -> float | None:
    """The value of aggregation `name` on these inputs."""
    aggregation = AGGREGATIONS[name]
    if aggregation.inputs == "shots":
        return aggregation.compute(rows, columns, params, list(input_values))
    return aggregation.compute(list(input_values), params)


def recompute(figure: Mapping[str, Any], shots_by_id: pd.DataFrame, values_by_id: Mapping[str, Any]) -> Any:
    """A figure row's value from exactly what it cites: its shots (shots.parquet rows indexed by
    shot_id) and the values of its input figures."""
    rows = shots_by_id.loc[list(figure["shot_ids"])]
    inputs = [values_by_id[i] for i in figure["input_figure_ids"]]
    params = json.loads(figure["parameters"] or "{}")
    return compute(figure["aggregation"], rows, list(figure["columns"]), params, inputs)
