"""Why drafting speeds up this much on this machine: a cost model of speculative decoding per
drafted cell, set against the measured speed-up.

A decode step without drafting emits one token and costs t(1). A verification step emits the
accepted drafts plus the target's own token and costs t(k+1), the time of a batch of k+1 tokens
(measured/verify_cost.py times it with the engine's tool right after the series, at its depth).
With the cell's counts (decoded tokens, drafted and accepted tokens, verification steps):

    predicted speed-up = decoded / (plain steps + verification steps x t(k+1)/t(1))

The same acceptance therefore gives a large speed-up where t(k+1)/t(1) is small (a batch costs
little more than a token: decode waits on memory) and a small one where it is near k+1 (compute
bound). Drafting's own cost is taken as nothing: an n-gram lookup in the engine's context is
microseconds a step. A mode that drafts with a model pays for its draft tokens too, which this
model leaves out: its residual says so. Residual = measured / predicted - 1.
"""

from typing import Any

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.answer_figures import quiet
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import Cell, group_cells
from whichshot.figures.workload_figures import SPEEDUP_METRIC
from whichshot.measure.verify_cost import ONE_TOKEN

VERIFY_COST = "verify_cost_ratio"
PREDICTED_SPEEDUP = "predicted_speedup_vs_none"
PREDICTION_RESIDUAL = "speedup_prediction_residual"
QUIET_PREDICTION_RESIDUAL = quiet(PREDICTION_RESIDUAL)
MODEL_COLUMNS = [
    "output_tokens",
    "engine_draft_tokens",
    "engine_draft_accepted",
    "engine_draft_mean_len",
    "server_spec_drafts_delta",
]


def speedup_model_figures(catalog: Catalog) -> list[figure.Figure]:
    figures = []
    for cell, rows in group_cells(catalog.shots):
        measured = catalog.find(cell, SPEEDUP_METRIC)
        probes = _verify_probes(catalog, rows)
        if measured is None or not probes:
            continue
        cost = _verify_cost(cell, probes)
        if cost is None:
            continue
        predicted = _predicted(catalog, cell, rows, cost, probes[0][1]["widths"][-1] - 1)
        figures += [cost, predicted, _residual(PREDICTION_RESIDUAL, measured, predicted, RESIDUAL_FORMULA)]
        # Against the speed-up without the host-busy shots, where the answer has one: foreign load
        # slows one side's shots, which no cost of drafting explains.
        quietly = catalog.find(cell, quiet(SPEEDUP_METRIC))
        if quietly is not None:
            figures.append(_residual(QUIET_PREDICTION_RESIDUAL, quietly, predicted, QUIET_RESIDUAL_FORMULA))
    return figures


RESIDUAL_FORMULA = (
    f"measured {SPEEDUP_METRIC} / {PREDICTED_SPEEDUP} - 1: what the cost model leaves unexplained (a draft "
    "model's own cost, sampling, host load)"
)
QUIET_RESIDUAL_FORMULA = (
    f"{quiet(SPEEDUP_METRIC)} / {PREDICTED_SPEEDUP} - 1: the residual without the shots host_busy names"
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


def _verify_probes(catalog: Catalog, rows: pd.DataFrame) -> list[tuple[str, dict[str, Any]]]:
    """(job id, probe record) of each of the cell's series whose verification-cost probe ran."""
    jobs = set(rows["job_id"])
    return [
        (run["job_id"], run["verify_cost"])
        for run in catalog.bench_runs
        if run.get("job_id") in jobs and (run.get("verify_cost") or {}).get("rows")
    ]


def _verify_cost(cell: Cell, probes: list[tuple[str, dict[str, Any]]]) -> figure.Figure | None:
    """t(k+1)/t(1) over every repetition of the cell's probes (one width per cell: its draft cap)."""
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
        return None
    return figure.from_source(
        VERIFY_COST,
        "verify_cost_ratio",
        {"width": width, "samples_one_tok_s": samples[ONE_TOKEN], "samples_wide_tok_s": samples[width]},
        sources,
        "ratio",
        cell=cell,
        formula=f"seconds of one {width}-token batch / of one token, llama-bench pp{width} and pp1 at the "
        f"series' mid-answer depth ({', '.join(map(str, depths))} tokens), mean tok/s of every repetition "
        "(-embd 1: the output head for every token of the batch, as a verification step computes it)",
        computed_by=speedup_model_figures,
        timed_by="llama-bench",
        which_shot="llama-bench's own protocol, run right after the drafted series in its job",
    )


def _predicted(
    catalog: Catalog, cell: Cell, rows: pd.DataFrame, cost: figure.Figure, cap: int
) -> figure.Figure:
    selection = catalog.rule(cell["protocol"]).select(rows, "decode_tok_s")
    return figure.from_shots(
        PREDICTED_SPEEDUP,
        cell,
        selection,
        "speculative_speedup",
        MODEL_COLUMNS,
        unit="ratio",
        parameters={"cap": cap},
        inputs=[cost],
        formula="decoded tokens / (plain steps + verification steps x t(k+1)/t(1)), summed over the shots "
        f"the cell's speed-up uses; steps = engine-reported accepted / (mean len - 1); t(k+1)/t(1) "
        f"interpolated linearly from 1 to {VERIFY_COST} at the cell's mean draft of k tokens (cap {cap})",
        computed_by=speedup_model_figures,
    )
