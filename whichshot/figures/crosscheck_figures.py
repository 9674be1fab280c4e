"""Two timers side by side: our client against the engine's own timings (per engine and model, and
per cell), and the engine's warm speed against llama-bench, another tool with its own protocol."""

import statistics
from dataclasses import dataclass, field
from typing import Any

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import ENGINE_MODEL, group_cells
from whichshot.figures.statistic import EveryShotRule
from whichshot.measure.bench import FLASH_ATTENTION_NAMES
from whichshot.shots.axes import BASE_WORKLOAD

CLIENT_ENGINE_METRIC = "client_vs_engine_decode_ratio"
# figure -> (our client's column, the engine's own)
CLIENT_ENGINE_RATIOS = {
    "client_vs_engine_decode_ratio": ("decode_tok_s", "engine_decode_tok_s"),
    "client_vs_engine_prefill_ratio": ("prefill_tok_s", "engine_prefill_tok_s"),
    # A time, not a speed: above 1 is the time our client saw beyond the engine's own (HTTP, stream).
    "client_vs_engine_ttft_ratio": ("ttft_s", "engine_ttft_s"),
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
        for cell, rows in [*group_cells(catalog.shots, ENGINE_MODEL), *group_cells(catalog.shots)]:
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
    """llama-bench against our warm engine-timed figures. Bracketed runs (the same work right before
    and after a warm series): per cell, llama-bench's mean, lowest and highest repetition, the ratio
    of our figure to its mean, and the ratio's range over every pairing of one of our shots with
    one of its repetitions (noise on both sides; a range clear of 1 is a systematic difference).
    Runs of the older per-engine file (no brackets): its means against every warm cell."""
    figures = []
    for run in catalog.bench_runs:
        if "brackets" not in run:
            figures += _unbracketed(catalog, run)
    for cell, rows in group_cells(catalog.shots):
        runs = [r for r in catalog.bench_runs if r.get("job_id") in set(rows["job_id"])]
        for test, pooled in pooled_tests(runs).items():
            figures += _same_work(catalog, cell, rows, test, pooled)
    return figures


@dataclass
class PooledTest:
    """One llama-bench test of a cell, pooled over its series' brackets."""

    row: dict[str, Any]  # the first bracket's row: the test's settings
    by_bracket: dict[str, list[float]] = field(default_factory=dict)  # every repetition's tok/s
    source_ids: list[str] = field(default_factory=list)

    @property
    def samples(self) -> list[float]:
        return [s for samples in self.by_bracket.values() for s in samples]


def pooled_tests(runs: list[dict[str, Any]]) -> dict[str, PooledTest]:
    """The cell's llama-bench tests (pp, tg) with every bracket's repetitions."""
    pooled: dict[str, PooledTest] = {}
    for run in runs:
        for bracket in run["brackets"]:
            for row in bracket["rows"]:
                test = pooled.setdefault(row["test"], PooledTest(row))
                test.by_bracket.setdefault(f"{run['job_id']}:{bracket['bracket']}", []).extend(
                    row["samples_tok_s"]
                )
                source = f"llama-bench:results/bench/{run['job_id']}.json#{bracket['bracket']}.{_label(row)}"
                test.source_ids.append(source)
    return pooled


def _label(row: dict[str, Any]) -> str:
    test = f"pp{row['n_prompt']}" if row["test"] == "pp" else f"tg{row['n_gen']}"
    return f"{test}@d{row.get('n_depth', 0)}"


def _settings(row: dict[str, Any]) -> str:
    return (
        f"threads {row['n_threads']}, batch {row['n_batch']}, micro-batch {row['n_ubatch']}, "
        f"GPU layers {row['n_gpu_layers']}, "
        f"flash attention {FLASH_ATTENTION_NAMES.get(row['flash_attn'], row['flash_attn'])}"
    )


def _same_work(catalog: Catalog, cell: dict, rows, test: str, pooled: PooledTest) -> list[figure.Figure]:
    bench_metric, ours_metric, ratio_metric = BENCH_TESTS[test]
    work = f"llama-bench {_label(pooled.row)} ({_settings(pooled.row)})"
    means = ", ".join(f"{statistics.fmean(v):.1f}" for v in pooled.by_bracket.values() if v)
    count = len(pooled.samples)
    formulas = {
        "mean": f"{work}: mean of {count} repetitions over {len(pooled.by_bracket)} bracket(s) "
        f"(bracket means {means} tok/s)",
        "lowest": f"{work}: the lowest of {count} repetitions",
        "highest": f"{work}: the highest of {count} repetitions",
    }
    tool = {
        what: figure.from_source(
            bench_metric if what == "mean" else f"{bench_metric}_{what}",
            f"tool_samples_{what}",
            {"samples": pooled.samples},
            pooled.source_ids,
            "tok/s",
            cell=cell,
            formula=formula,
            computed_by=bench_figures,
            timed_by="llama-bench",
            which_shot="llama-bench's own protocol (a warm-up run, then its repetitions), run right "
            "before and right after the series",
        )
        for what, formula in formulas.items()
    }
    ours = catalog.find(cell, ours_metric)
    if ours is None or ours.value is None:
        return list(tool.values())
    return [*tool.values(), *_ratios(catalog, cell, rows, ours, tool, ratio_metric, work)]


def _ratios(catalog, cell, rows, ours, tool, ratio_metric: str, work: str) -> list[figure.Figure]:
    """Our figure over llama-bench's mean, and the range over every pairing of shot and repetition."""
    ratio = figure.from_figures(
        ratio_metric,
        [ours, tool["mean"]],
        "ratio",
        unit="ratio",
        computed_by=bench_figures,
        formula=f"our warm {ours.metric} / llama-bench's mean, the same work ({work})",
    )
    selection = catalog.rule("warm").select(rows, ours.metric)
    ends = [
        figure.from_shots(
            f"{ratio_metric}_{end}",
            cell,
            selection,
            aggregation,
            [ours.metric],
            inputs=[tool[against]],
            unit="ratio",
            computed_by=bench_figures,
            formula=f"{words} warm-rule {ours.metric} / llama-bench's {against} repetition: the {end} end "
            "of the ratio over every pairing of one of our shots with one of its repetitions",
        )
        for end, words, aggregation, against in (
            ("low", "lowest", "lowest_over_input", "highest"),
            ("high", "highest", "highest_over_input", "lowest"),
        )
    ]
    return [ratio, *ends]


def _unbracketed(catalog: Catalog, run: dict[str, Any]) -> list[figure.Figure]:
    """An older run's file: llama-bench once per engine and model, pp at each prompt length and tg
    from an empty context, not interleaved with the shots."""
    figures = []
    for row in run["rows"]:
        bench = _unbracketed_figure(run, row)
        figures += [bench, *_against_ours(catalog, run, row, bench)]
    return figures


def _unbracketed_figure(run: dict[str, Any], row: dict[str, Any]) -> figure.Figure:
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
        which_shot="llama-bench's own protocol (a warm-up run, then the mean of its repetitions), run "
        "once per engine and model, apart from the series",
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
