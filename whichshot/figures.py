"""Every number the report shows, as a row with its provenance kind, formula and inputs."""

import statistics
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from whichshot.stats import WarmRule, warm_statistic

KINDS = ("measured", "engine-reported", "derived", "inferred", "assumed")


@dataclass
class Figure:
    """One reported number and how it came to be."""

    figure_id: str
    value: float | None
    unit: str
    kind: str
    formula: str
    engine: str
    model: str
    prompt_tokens: int | None
    protocol: str
    metric: str
    shot_ids: list[str] = field(default_factory=list)
    shot_indices: str = ""
    rest_s: float | None = None
    series_label: str = ""
    note: str = ""
    timed_by: str = "whichshot client"
    caveat_ids: list[str] = field(default_factory=list)
    workload: str = ""
    text_kind: str = ""
    spec_mode: str = ""
    # What the figure was computed from where shot ids alone don't say it (llama-bench, telemetry).
    source: str = ""
    # Protocol, shot indices used, rest before the shot and whose tool timed it, in words.
    which_shot: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown provenance kind {self.kind!r}")

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


# (metric column, unit, kind, formula, timed_by)
SHOT_METRICS = (
    ("ttft_s", "s", "measured", "time from request sent to first token received", "whichshot client"),
    ("prefill_tok_s", "tok/s", "derived", "prompt tokens / TTFT", "whichshot client"),
    ("decode_tok_s", "tok/s", "derived",
     "(output tokens - 1) / (last token arrival - first token arrival)", "whichshot client"),
    ("engine_prefill_tok_s", "tok/s", "engine-reported", "llama-server timings.prompt_per_second",
     "engine"),
    ("engine_decode_tok_s", "tok/s", "engine-reported", "llama-server timings.predicted_per_second",
     "engine"),
)  # fmt: skip


CELL_KEYS = ["engine", "model", "series_label", "prompt_tokens", "protocol", "rest_s"]


def _groups(shots: pd.DataFrame) -> Iterator[tuple[tuple, pd.DataFrame]]:
    ok = shots[shots["status"] == "ok"]
    yield from ok.groupby(CELL_KEYS, sort=False)


def protocol_figures(shots: pd.DataFrame, rule: WarmRule) -> list[Figure]:
    """Cold (median over fresh processes) and warm (rule over each series) per metric."""
    figures = []
    for (engine, model, label, length, protocol, rest_s), group in _groups(shots):
        for metric, unit, kind, formula, timed_by in SHOT_METRICS:
            if group[metric].isna().all():
                continue
            if protocol == "cold":
                figure = _cold_figure(group, metric, unit, kind, formula)
            else:
                figure = _warm_figure(group, metric, unit, kind, formula, rule)
            figure.engine, figure.model, figure.prompt_tokens = engine, model, int(length)
            figure.protocol, figure.rest_s, figure.timed_by = protocol, float(rest_s), timed_by
            figure.series_label = label
            figures.append(figure)
    return figures


def _cold_values(group: pd.DataFrame, metric: str) -> list[float]:
    """The metric of shot 1 of each fresh process."""
    return group[group["shot_index"] == 1][metric].dropna().tolist()


def _warm_values(group: pd.DataFrame, metric: str, rule: WarmRule) -> list[float]:
    """The warm statistic of each series in the group."""
    return [
        warm_statistic(series.sort_values("series_position")[metric].tolist(), rule)
        for _job, series in group.groupby("job_id")
    ]


def cell_statistic(group: pd.DataFrame, metric: str, protocol: str, rule: WarmRule) -> float | None:
    """A cell's headline value: median of cold shot-1 values, or median of the series' warm statistics."""
    values = _cold_values(group, metric) if protocol == "cold" else _warm_values(group, metric, rule)
    return statistics.median(values) if values else None


def _cold_figure(group: pd.DataFrame, metric, unit, kind, formula) -> Figure:
    first_shots = group[group["shot_index"] == 1]
    values = _cold_values(group, metric)
    return Figure(
        figure_id="",
        value=statistics.median(values) if values else None,
        unit=unit,
        kind=kind if len(values) == 1 else ("derived" if kind == "measured" else kind),
        formula=f"median over {len(values)} fresh processes of shot 1: {formula}",
        engine="", model="", prompt_tokens=None, protocol="cold", metric=metric,
        shot_ids=first_shots["shot_id"].tolist(),
        shot_indices="1 (of each fresh process)",
    )  # fmt: skip


def _warm_figure(group: pd.DataFrame, metric, unit, kind, formula, rule: WarmRule) -> Figure:
    values, ids, described = _warm_values(group, metric, rule), [], []
    for _job, series in group.groupby("job_id"):
        kept = rule.shot_indices(len(series))
        ids += series[series["series_position"].isin(kept)]["shot_id"].tolist()
        described.append(rule.describe(len(series)))
    return Figure(
        figure_id="",
        value=statistics.median(values),
        unit=unit,
        kind="derived" if kind == "measured" else kind,
        formula=f"{described[0]}, median over {len(values)} series: {formula}",
        engine="", model="", prompt_tokens=None, protocol="warm", metric=metric,
        shot_ids=ids,
        shot_indices=described[0].split("(")[-1].rstrip(")"),
    )  # fmt: skip


def assign_ids(figures: list[Figure]) -> list[Figure]:
    """Stable, readable ids: the series label's parts joined by '/', then the metric."""
    for figure in figures:
        figure.figure_id = "/".join([*figure.series_label.split("."), figure.metric])
    return figures
