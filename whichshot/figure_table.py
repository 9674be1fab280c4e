"""Shots (+ llama-bench runs) -> figures.parquet and caveats.parquet."""

import json
from pathlib import Path
from typing import Any

import pandas as pd

from whichshot.caveats import Evidence, fire_caveats
from whichshot.crosscheck import bench_figures, client_engine_agreement
from whichshot.engine_comparison import engine_comparison_figures
from whichshot.figures import Figure, assign_ids, protocol_figures
from whichshot.power import power_figures
from whichshot.stats import WarmRule
from whichshot.which_shot import label_figures
from whichshot.workload_figures import workload_figures


def compute_figures(
    shots: pd.DataFrame, bench_runs: list[dict[str, Any]], rule: WarmRule
) -> tuple[list[Figure], list]:
    """Every figure of the report and the caveats that fire on them."""
    figures = assign_ids(protocol_figures(shots, rule))
    figures += client_engine_agreement(shots)
    figures += bench_figures(shots, bench_runs)
    figures += power_figures(shots, rule)
    figures += workload_figures(shots, rule)
    figures += engine_comparison_figures(shots, rule)
    figures = label_figures(figures, shots)
    caveats = fire_caveats(Evidence(shots, figures, unreadable_sensors(shots)))
    return figures, caveats


def unreadable_sensors(shots: pd.DataFrame) -> list[str]:
    """Sensor names any shot's telemetry could not read."""
    names: set[str] = set()
    for joined in shots["telemetry_not_measured"].dropna():
        names.update(n for n in joined.split("|") if n)
    return sorted(names)


def write_figure_tables(figures: list[Figure], caveats: list, figures_path: Path, caveats_path: Path) -> None:
    """figures.parquet (one row per reported number) and caveats.parquet."""
    figures_path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([f.as_row() for f in figures]).to_parquet(figures_path, index=False)
    caveat_frame = pd.DataFrame(
        [c.as_row() for c in caveats], columns=["caveat_id", "sentence", "figure_ids"]
    )
    caveat_frame.to_parquet(caveats_path, index=False)


def write_figures_from_files(
    shots_path: Path, bench_paths: list[Path], warm_fraction: float, figures_path: Path, caveats_path: Path
) -> None:
    """The compute_figures step, from the files the pipeline writes."""
    shots = pd.read_parquet(shots_path)
    bench_runs = [json.loads(Path(p).read_text()) for p in bench_paths]
    figures, caveats = compute_figures(shots, bench_runs, WarmRule(warm_fraction))
    write_figure_tables(figures, caveats, figures_path, caveats_path)
