"""Why drafting speeds up this much on this machine: a cost model of speculative decoding per
drafted cell, set against the measured speed-up.

A decode step that drafted nothing emits one token and costs one one-token step. A verification
step checks k drafts and the target's own position and emits the a drafts it accepted plus the
target's token; the server's verify probe (measure/verify_probe.py) times both kinds on the server
the series used, right after it: at each verify width w = k + 1 it timed, the step that accepts no
draft (none(w): the forward pass over w positions, one sampling) and the one that accepts every
draft (all(w)), each over the one-token step. Each accepted token then costs
token(w) = (all(w) - none(w)) / (w - 1): sampling its position on the host and emitting it. With the
cell's counts (decoded tokens, verification steps, mean draft k and mean accepted a per step):

    predicted speed-up = decoded / (plain steps + verification steps x (none(k) + a x token(k)))

none(k) linear between the widths timed (1 at k = 0) and token(k) likewise. The step's kernel share
is none(k) over its cost, its per-token share a x token(k) over it: where a forward pass over many
positions costs little more than one (a GPU, a small model), the per-token share sets the speed-up.
llama-bench's batch ratio t(k+1)/t(1) (measure/verify_cost.py) stays beside it: the kernel alone,
without sampling. The probe repeats each point until its last requests spread at most
VERIFY_PROBE_SPREAD_LIMIT (slowest over fastest) or its cap is reached (measure/settle.py); a probe
whose kept requests still spread more feeds no prediction (caveat verify_probe_unsteady), and
verify_probe_repetitions says how many timed requests its busiest point took. The drafter's own
cost is left out: an n-gram lookup is microseconds, a draft model is not (its residual says so).
Residual = measured / predicted - 1.
"""

from typing import Any

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import Cell, group_cells
from whichshot.figures.constants import VERIFY_PROBE_SPREAD_LIMIT
from whichshot.figures.step_probe import (
    PointSamples,
    one_token,
    point_samples,
    probed_widths,
    timed_requests,
)
from whichshot.figures.workload_figures import SPEEDUP_METRIC
from whichshot.measure.probe_steps import ACCEPT_ALL, ACCEPT_NONE, ONE_TOKEN_WIDTH
from whichshot.measure.verify_cost import ONE_TOKEN
from whichshot.measure.verify_probe import SERIES_DRAFTER

VERIFY_COST = "verify_cost_ratio"
VERIFY_COST_SPREAD = "verify_cost_spread"
PLAIN_STEP_MS = "one_token_step_ms"
PROBE_SPREAD = "verify_probe_spread"
PROBE_REPETITIONS = "verify_probe_repetitions"
DRAFTER_STEP = "drafter_step_ratio"
DRAFTER_SHARE = "verify_drafter_share"
# verify_step_ratio_{none,all}_accepted_w{width}: one per width the probe timed (section verify_width)
STEP_RATIO = "verify_step_ratio_"
PREDICTED_SPEEDUP = "predicted_speedup_vs_none"
KERNEL_SHARE = "verify_kernel_share"
ACCEPTED_SHARE = "verify_token_share"
PREDICTION_RESIDUAL = "speedup_prediction_residual"
MODEL_COLUMNS = [
    "output_tokens",
    "engine_draft_tokens",
    "engine_draft_accepted",
    "engine_draft_mean_len",
    "server_spec_drafts_delta",
]
PROBE_TIMED_BY = "llama-server (its own step timings)"
PROBE_WHICH_SHOT = (
    "the server's verify probe right after the drafted series, in its job (warm-up request left out)"
)


def step_ratio_metric(server: str, width: int) -> str:
    return f"{STEP_RATIO}{server.removeprefix('accept_')}_accepted_w{width}"


def speedup_model_figures(catalog: Catalog) -> list[figure.Figure]:
    figures = []
    for cell, rows in group_cells(catalog.shots):
        measured = catalog.find(cell, SPEEDUP_METRIC)
        if measured is None:
            continue
        figures += _llama_bench_figures(cell, _runs(catalog, rows, "verify_cost", "rows"))
        model = _server_model(catalog, cell, rows, _runs(catalog, rows, "verify_probe", "points"))
        if model is None:
            continue
        figures += model
        predicted = next(f for f in model if f.metric == PREDICTED_SPEEDUP)
        figures.append(_residual(PREDICTION_RESIDUAL, measured, predicted, RESIDUAL_FORMULA))
    return figures


RESIDUAL_FORMULA = (
    f"measured {SPEEDUP_METRIC} / {PREDICTED_SPEEDUP} - 1: what the cost model leaves unexplained (a draft "
    "model's own cost, the drafter's lookups, host load)"
)


def _residual(metric: str, measured: figure.Figure, predicted: figure.Figure, formula: str) -> figure.Figure:
    """measured / predicted - 1 (inferred: it rests on the prediction)."""
    return figure.from_figures(
        metric,
        [measured, predicted],
        "relative_gap",
        unit="fraction",
        formula=formula,
        computed_by=speedup_model_figures,
    )


def _runs(catalog: Catalog, rows: pd.DataFrame, key: str, holds: str) -> list[tuple[str, dict[str, Any]]]:
    """(job id, probe record) of each of the cell's series whose probe under `key` holds `holds`."""
    jobs = set(rows["job_id"])
    return [
        (run["job_id"], run[key])
        for run in catalog.bench_runs
        if run.get("job_id") in jobs and (run.get(key) or {}).get(holds)
    ]


# -- llama-bench: the kernel alone ----------------------------------------------------------------
def _llama_bench_figures(cell: Cell, probes: list[tuple[str, dict[str, Any]]]) -> list[figure.Figure]:
    """t(k+1)/t(1) over every repetition of the cell's probes (one width per cell: its draft cap),
    and how far those repetitions spread."""
    if not probes:
        return []
    width = probes[0][1]["widths"][-1]
    samples: dict[int, list[float]] = {ONE_TOKEN: [], width: []}
    sources, depths = [], []
    for job_id, probe in probes:
        for row in probe["rows"]:
            if row["test"] == "pp" and row["n_prompt"] in samples:
                samples[row["n_prompt"]].extend(row["samples_tok_s"])
                sources.append(f"llama-bench:results/bench/{job_id}.json#verify_cost.pp{row['n_prompt']}"
                               f"@d{row['n_depth']}")  # fmt: skip
        depths.append(probe["depth_tokens"])
    if not samples[ONE_TOKEN] or not samples[width]:
        return []
    which_shot = "llama-bench's own protocol, run right after the drafted series in its job"
    described = {"cell": cell, "computed_by": speedup_model_figures, "timed_by": "llama-bench",
                 "which_shot": which_shot}  # fmt: skip
    cost = figure.from_source(
        VERIFY_COST,
        "verify_cost_ratio",
        {"width": width, "samples_one_tok_s": samples[ONE_TOKEN], "samples_wide_tok_s": samples[width]},
        sources,
        "ratio",
        formula=f"seconds of one {width}-token batch / of one token, llama-bench pp{width} and pp1 at the "
        f"series' mid-answer depth ({', '.join(map(str, depths))} tokens), mean tok/s of every repetition "
        "(-embd 1: the output head for every token of the batch, as a verification step computes it); "
        "the kernel alone, no sampling",
        **described,
    )
    spread = figure.from_source(
        VERIFY_COST_SPREAD,
        "largest_spread",
        {"samples_ms_by_point": {f"pp{w}": [1e3 / v for v in s if v > 0] for w, s in samples.items()}},
        sources,
        "ratio",
        formula=f"slowest / fastest repetition of llama-bench's pp1 and pp{width} (the larger of the two)",
        **described,
    )
    return [cost, spread]


# -- the server's verify probe: the cost model ---------------------------------------------------
def _server_model(
    catalog: Catalog, cell: Cell, rows: pd.DataFrame, probes: list[tuple[str, dict[str, Any]]]
) -> list[figure.Figure] | None:
    """The probe's figures for the cell and the model's prediction and step shares (None: no probe,
    or a point it timed without a sample)."""
    one, widths = one_token(probes), probed_widths(probes)
    points = [point_samples(probes, server, w) for server in (ACCEPT_NONE, ACCEPT_ALL) for w in widths]
    if not one.samples_ms or not widths or not all(p.samples_ms for p in points):
        return None
    # the series' own drafter's plain step (records since issue 53; none where every step drafted)
    drafter = [d for d in [point_samples(probes, SERIES_DRAFTER, ONE_TOKEN_WIDTH)] if d.samples_ms]
    ratios = [_step_ratio(cell, p, one) for p in points]
    lookups = [_drafter_step(cell, d, one) for d in drafter]
    spread = _probe_spread(cell, [one, *points, *drafter])
    selection = catalog.rule(cell["protocol"]).select(rows, "decode_tok_s")
    inputs = [spread, *ratios, *lookups]
    outputs = [o for o in MODEL_OUTPUTS if lookups or o != "drafter_share"]
    return [
        _one_token_step(cell, one),
        *ratios,
        *lookups,
        spread,
        _probe_repetitions(cell, probes, spread.source_ids),
        *(_model_figure(output, cell, selection, inputs, widths, bool(lookups)) for output in outputs),
    ]


def _drafter_step(cell: Cell, drafter: PointSamples, one: PointSamples) -> figure.Figure:
    return figure.from_source(
        DRAFTER_STEP,
        "step_ratio",
        {"samples_ms": drafter.samples_ms, "one_token_samples_ms": one.samples_ms, "width": ONE_TOKEN_WIDTH},
        [*drafter.sources, *one.sources],
        "ratio",
        cell=cell,
        formula="median step of the series' own drafting that drafted nothing (after a step of one token), "
        f"on real text, over the median one-token step ({PLAIN_STEP_MS}): 1 + the drafter's host-side cost "
        "of a step (its lookup and its update) beyond the probe's copy drafter's, by the server's own clock",
        computed_by=speedup_model_figures,
        timed_by=PROBE_TIMED_BY,
        which_shot=PROBE_WHICH_SHOT,
    )


def _one_token_step(cell: Cell, one: PointSamples) -> figure.Figure:
    return figure.from_source(
        PLAIN_STEP_MS,
        "tool_samples_median",
        {"samples": one.samples_ms},
        one.sources,
        "ms",
        cell=cell,
        formula="median over the probe's timed requests of each one's median steady step, a step that "
        "drafted nothing, by the server's own clock (a prompt ending in a repeat of 2 tokens)",
        computed_by=speedup_model_figures,
        timed_by=PROBE_TIMED_BY,
        which_shot=PROBE_WHICH_SHOT,
    )


def _step_ratio(cell: Cell, point: PointSamples, one: PointSamples) -> figure.Figure:
    accepted = "every draft accepted" if point.server == ACCEPT_ALL else "no draft accepted"
    return figure.from_source(
        step_ratio_metric(point.server, point.width),
        "step_ratio",
        {"samples_ms": point.samples_ms, "one_token_samples_ms": one.samples_ms, "width": point.width},
        [*point.sources, *one.sources],
        "ratio",
        cell=cell,
        formula=f"median steady step verifying {point.width} positions ({point.width - 1} drafts), "
        f"{accepted}, over the median one-token step ({PLAIN_STEP_MS}), each the median over timed "
        "requests of their steady steps, by the server's own clock",
        computed_by=speedup_model_figures,
        timed_by=PROBE_TIMED_BY,
        which_shot=PROBE_WHICH_SHOT,
    )


def _probe_spread(cell: Cell, points: list[PointSamples]) -> figure.Figure:
    return figure.from_source(
        PROBE_SPREAD,
        "largest_spread",
        {"samples_ms_by_point": {p.name: p.samples_ms for p in points}},
        list(dict.fromkeys(s for p in points for s in p.sources)),
        "ratio",
        cell=cell,
        formula="slowest / fastest timed request of each point the probe timed (one-token step, each width "
        f"with no draft or every draft accepted), the largest; above {VERIFY_PROBE_SPREAD_LIMIT} "
        "(verify_probe_spread_limit) the probe feeds no prediction",
        computed_by=speedup_model_figures,
        timed_by=PROBE_TIMED_BY,
        which_shot=PROBE_WHICH_SHOT,
    )


def _probe_repetitions(
    cell: Cell, probes: list[tuple[str, dict[str, Any]]], sources: list[str]
) -> figure.Figure:
    return figure.from_source(
        PROBE_REPETITIONS,
        "tool_samples_highest",
        {"samples": timed_requests(probes)},
        sources,
        "requests",
        cell=cell,
        formula="the most timed requests (warm-ups aside) any point of the cell's probes ran: each point is "
        "timed until its last `repetitions` requests spread at most the limit or `max_repetitions` ran",
        computed_by=speedup_model_figures,
        timed_by=PROBE_TIMED_BY,
        which_shot=PROBE_WHICH_SHOT,
    )


# output -> (metric, unit, what it is)
MODEL_OUTPUTS = {
    "speedup": (PREDICTED_SPEEDUP, "ratio", "decoded tokens / (plain steps + verification steps x step)"),
    "kernel_share": (
        KERNEL_SHARE,
        "fraction",
        "none(k) / step: the forward pass's share of a verification step",
    ),
    "token_share": (
        ACCEPTED_SHARE,
        "fraction",
        "a x token(k) / step: the accepted tokens' share of a verification step",
    ),
    "drafter_share": (
        DRAFTER_SHARE,
        "fraction",
        "(d - 1) / step: the series' drafter's host-side share of a verification step",
    ),
}


def _model_figure(
    output: str, cell: Cell, selection, inputs: list[figure.Figure], widths: list[int], drafter: bool
) -> figure.Figure:
    metric, unit, what = MODEL_OUTPUTS[output]
    parameters = {"widths": widths, "spread_limit": VERIFY_PROBE_SPREAD_LIMIT, "output": output}
    lookup = ""
    if drafter:  # older records have no drafter step: their parameters stay as they were
        parameters["drafter"] = True
        lookup = (f"; every step, plain or verifying, costs d - 1 more one-token steps, d = {DRAFTER_STEP} "
                  "(the series' drafter's host-side lookup)")  # fmt: skip
    return figure.from_shots(
        metric,
        cell,
        selection,
        "server_step_model",
        MODEL_COLUMNS,
        unit=unit,
        parameters=parameters,
        inputs=inputs,
        formula=f"{what}, summed over the shots the cell's speed-up uses; step = none(k) + a x token(k) "
        "one-token steps at the cell's mean draft k and mean accepted a per verification step (engine-"
        "reported; steps = accepted / (mean len - 1)); none(w) and all(w) the server's step at verify "
        f"width w (widths {', '.join(map(str, widths))}) with no / every draft accepted, token(w) = "
        f"(all(w) - none(w)) / (w - 1), linear in k between widths{lookup}; none if the probe spread above "
        "the limit",
        computed_by=speedup_model_figures,
    )
