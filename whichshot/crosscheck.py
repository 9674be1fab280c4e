"""Figures that set two timers side by side: our client vs the engine, our prefill vs llama-bench."""

import statistics
from typing import Any

import pandas as pd

from whichshot.figures import Figure

CLIENT_ENGINE_TOLERANCE = 0.01
BENCH_TOLERANCE = 0.03


def client_engine_agreement(shots: pd.DataFrame) -> list[Figure]:
    """Median over shots of client decode tok/s / engine-reported decode tok/s, per engine+model."""
    figures = []
    ok = shots[(shots["status"] == "ok")].dropna(subset=["decode_tok_s", "engine_decode_tok_s"])
    for (engine, model), group in ok.groupby(["engine", "model"], sort=True):
        ratios = (group["decode_tok_s"] / group["engine_decode_tok_s"]).tolist()
        figures.append(
            Figure(
                figure_id=f"{engine}/{model}/all/client_vs_engine_decode_ratio",
                value=statistics.median(ratios),
                unit="ratio",
                kind="derived",
                formula="median over all shots of client decode tok/s / engine predicted_per_second",
                engine=engine,
                model=model,
                prompt_tokens=None,
                protocol="all",
                metric="client_vs_engine_decode_ratio",
                shot_ids=group["shot_id"].tolist(),
                shot_indices="all",
                timed_by="whichshot client and engine",
            )  # fmt: skip
        )
    return figures


def bench_figures(shots: pd.DataFrame, bench_runs: list[dict[str, Any]]) -> list[Figure]:
    """llama-bench pp/tg (engine-reported, another tool) and our prefill / its pp."""
    figures = []
    for run in bench_runs:
        for row in run["rows"]:
            figures += _bench_row_figures(shots, run, row)
    return figures


def _bench_row_figures(shots: pd.DataFrame, run: dict, row: dict) -> list[Figure]:
    engine, model = run["engine"], run["model"]
    length = row["n_prompt"] if row["test"] == "pp" else None
    label = f"pp{row['n_prompt']}" if row["test"] == "pp" else f"tg{row['n_gen']}"
    bench = Figure(
        figure_id=f"{engine}/{model}/llama-bench/{label}",
        value=row["avg_tok_s"],
        unit="tok/s",
        kind="engine-reported",
        formula=f"llama-bench {label}: mean of {row['repetitions']} repetitions "
        f"(std {row['std_tok_s']:.1f} tok/s)",
        engine=engine, model=model, prompt_tokens=length, protocol="llama-bench",
        metric=f"bench_{row['test']}_tok_s", shot_indices="llama-bench repetitions",
        timed_by="llama-bench",
    )  # fmt: skip
    figures = [bench]
    if row["test"] == "pp":
        ours = shots[(shots["engine"] == engine) & (shots["model"] == model)
                     & (shots["prompt_tokens"] == length) & (shots["status"] == "ok")
                     & (shots["shot_index"] > 1)]  # fmt: skip
        if len(ours) and ours["engine_prefill_tok_s"].notna().any():
            ratio = ours["engine_prefill_tok_s"].median() / row["avg_tok_s"]
            figures.append(
                Figure(
                    figure_id=f"{engine}/{model}/p{length}/prefill_vs_llama_bench_ratio",
                    value=ratio,
                    unit="ratio",
                    kind="derived",
                    formula="median engine-reported prefill tok/s of our warm shots (shot index "
                    ">= 2) / llama-bench pp tok/s at the same length",
                    engine=engine,
                    model=model,
                    prompt_tokens=int(length),
                    protocol="warm",
                    metric="prefill_vs_llama_bench_ratio",
                    shot_ids=ours["shot_id"].tolist(),
                    shot_indices=">= 2",
                    timed_by="engine and llama-bench",
                )  # fmt: skip
            )
    return figures
