"""Two timers side by side: our client against the engine's own timings (per engine and model, and
per cell), and the engine's warm speed against llama-bench, another tool with its own protocol."""

from typing import Any

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import group_cells
from whichshot.figures.statistic import EveryShotRule
from whichshot.measure.grid import BASE_WORKLOAD

CLIENT_ENGINE_METRIC = "client_vs_engine_decode_ratio"
# figure -> (our client's column, the engine's own)
CLIENT_ENGINE_RATIOS = {
    "client_vs_engine_decode_ratio": ("decode_tok_s", "engine_decode_tok_s"),
    "client_vs_engine_prefill_ratio": ("prefill_tok_s", "engine_prefill_tok_s"),
}
# llama-bench test -> (its figure, our warm figure it is set against, the ratio's metric)
BENCH_TESTS = {
    "pp": ("bench_pp_tok_s", "engine_prefill_tok_s", "prefill_vs_llama_bench_ratio"),
    "tg": ("bench_tg_tok_s", "engine_decode_tok_s", "decode_vs_llama_bench_ratio"),
}


def client_engine_figures(catalog: Catalog) -> list[figure.Figure]:
    """Median over shots of our client's tok/s / the engine's own, for decode and prefill: per engine
    and model (every shot), and per cell (client_engine_disagree fires per cell)."""
    figures = []
    for metric, columns in CLIENT_ENGINE_RATIOS.items():
        for cell, rows in [*group_cells(catalog.shots, ("engine", "model")), *group_cells(catalog.shots)]:
            selection = EveryShotRule().select(rows.dropna(subset=list(columns)), None)
            if selection.rows.empty:
                continue
            figures.append(
                figure.from_shots(
                    metric,
                    cell,
                    selection,
                    "median_of_ratios",
                    list(columns),
                    unit="ratio",
                    computed_by=client_engine_figures,
                    formula=f"median over shots of client {columns[0]} / engine-reported {columns[1]}",
                )
            )
    return figures


def bench_figures(catalog: Catalog) -> list[figure.Figure]:
    """llama-bench's pp/tg (engine-reported: another tool's numbers) and our warm engine-timed
    figures at the same length over them, per warm cell of the protocol grid."""
    figures = []
    for run in catalog.bench_runs:
        for row in run["rows"]:
            bench = _bench_figure(run, row)
            figures += [bench, *_against_ours(catalog, run, row, bench)]
    return figures


def _bench_figure(run: dict[str, Any], row: dict[str, Any]) -> figure.Figure:
    metric = BENCH_TESTS[row["test"]][0]
    label = f"pp{row['n_prompt']}" if row["test"] == "pp" else f"tg{row['n_gen']}"
    return figure.given(
        metric,
        row["avg_tok_s"],
        "tok/s",
        "reported_by_another_tool",
        f"llama-bench:results/bench/{run['engine']}/{run['model']}.json#{label}",
        cell={
            "engine": run["engine"],
            "model": run["model"],
            **({"prompt_tokens_requested": row["n_prompt"]} if row["test"] == "pp" else {}),
        },
        formula=f"llama-bench {label}: mean of {row['repetitions']} repetitions "
        f"(std {row['std_tok_s']:.1f} tok/s)",
        computed_by=bench_figures,
        timed_by="llama-bench",
        which_shot="llama-bench's own protocol (a warm-up run, then the mean of its repetitions)",
    )


def _against_ours(catalog: Catalog, run: dict, row: dict, bench: figure.Figure) -> list[figure.Figure]:
    _bench_metric, ours_metric, ratio_metric = BENCH_TESTS[row["test"]]
    figures = []
    for cell, _rows in group_cells(catalog.shots):
        same = (cell["engine"], cell["model"]) == (run["engine"], run["model"])
        if not same or cell["workload"] != BASE_WORKLOAD or cell["protocol"] != "warm":
            continue
        if row["test"] == "pp" and cell["prompt_tokens_requested"] != row["n_prompt"]:
            continue
        ours = catalog.find(cell, ours_metric)
        if ours is None or ours.value is None:
            continue
        setting = (
            "same prompt length"
            if row["test"] == "pp"
            else f"our decode follows a {cell['prompt_tokens_requested']}-token prefill, llama-bench's an "
            "empty context"
        )
        figures.append(
            figure.from_figures(
                ratio_metric,
                [ours, bench],
                "ratio",
                unit="ratio",
                computed_by=bench_figures,
                formula=f"our warm {ours_metric} / llama-bench {bench.metric} ({setting})",
            )
        )
    return figures
