"""Shots (+ llama-bench runs, the hardware probe, the models' per-token costs) -> figures.parquet and
caveats.parquet: every figure family in order (later ones build on earlier figures), then every
caveat rule, joined to figures by the shots they cite (caveats.finding.attach)."""

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from whichshot.figures.answer_figures import answer_figures
from whichshot.figures.catalog import Catalog
from whichshot.figures.caveats import attach, rules
from whichshot.figures.ceiling_figures import ceiling_figures
from whichshot.figures.cell_figures import cell_figures
from whichshot.figures.clock_figures import clock_drop_figures, clock_ratio_figures
from whichshot.figures.constants import VERDICT_MARGIN, constant_figures
from whichshot.figures.crosscheck_figures import bench_figures, client_engine_figures
from whichshot.figures.energy_figures import energy_figures
from whichshot.figures.engine_figures import engine_figures
from whichshot.figures.figure import Figure
from whichshot.figures.load_figures import load_figures
from whichshot.figures.node_figures import node_figures
from whichshot.figures.outlier_figures import outlier_figures
from whichshot.figures.peer_figures import peer_figures
from whichshot.figures.speedup_model_figures import speedup_model_figures
from whichshot.figures.trace_figures import trace_figures
from whichshot.figures.verdict import LEVEL
from whichshot.figures.workload_figures import workload_figures
from whichshot.measure.kernel_probe import merge_after
from whichshot.shots.axes import AXES
from whichshot.shots.upgrade import read_shots, upgrade_shots
from whichshot.tables import record_schema, write_table

# In this order: a family may use the figures of those before it.
FAMILIES = (
    cell_figures,
    energy_figures,
    client_engine_figures,
    bench_figures,
    peer_figures,
    clock_ratio_figures,
    clock_drop_figures,
    outlier_figures,
    ceiling_figures,
    load_figures,
    workload_figures,
    answer_figures,  # after the cells' decode figures, the speed-ups and their gates
    speedup_model_figures,  # after the speed-ups it explains, with and without host-busy shots
    trace_figures,
    engine_figures,
    node_figures,
)


def compute_figures(
    shots: pd.DataFrame,
    bench_runs: list[dict[str, Any]],
    warm_fraction: float,
    probes: list[dict[str, Any]] = (),
    traffic: dict[str, dict[str, Any]] | None = None,
    verdict_margin: float = VERDICT_MARGIN,
    verdict_level: float = LEVEL,
) -> tuple[list[Figure], list[dict[str, Any]]]:
    """Every figure of the report, and the caveat rows (each with the figures it touches). Without
    a hardware probe (an older run) there are no ceilings; with one per node, each node's cells run
    against their node's."""
    # The output itself is not a figure's input (its sha256 and checks are): leave the heavy columns out.
    light = _plain_strings(upgrade_shots(shots).drop(columns=["output_token_ids", "output_text"]))
    catalog = Catalog(light, warm_fraction, verdict_margin, bench_runs, list(probes), traffic or {},
                      verdict_level=verdict_level)  # fmt: skip
    catalog.add(constant_figures(warm_fraction, verdict_margin))
    for family in FAMILIES:
        catalog.add(family(catalog))
    findings = [f for rule in rules() if (f := rule(catalog)) is not None]
    caveats = attach(findings, catalog.figures, catalog.shots)
    return catalog.figures, caveats


def _plain_strings(shots: pd.DataFrame) -> pd.DataFrame:
    """String columns as Python objects in one consolidated block per dtype (same values, same
    comparisons): every figure selects rows, and taking rows of Arrow-backed strings column by column
    cost most of a derivation's time."""
    strings = shots.select_dtypes(include="str").columns
    return shots.astype(dict.fromkeys(strings, object)).copy()  # the copy consolidates the blocks


def figure_table_schema() -> dict[str, Any]:
    """figures.schema.yaml plus a nullable column per grid axis, typed as the shots' column."""
    schema = copy.deepcopy(record_schema("figures"))
    shots = record_schema("shots")["properties"]
    for axis in AXES:
        kind = shots[axis]["type"]
        kinds = kind if isinstance(kind, list) else [kind]
        schema["properties"][axis] = {"type": [*kinds, "null"] if "null" not in kinds else kinds}
    return schema


def read_figures(path: Path) -> pd.DataFrame:
    """A figures.parquet of any schema version (its Parquet metadata says which) with this version's
    columns (see upgrade_figures)."""
    metadata = pq.read_schema(path).metadata or {}
    return upgrade_figures(pd.read_parquet(path), int(metadata.get(b"schema_version", 1)))


VERSION_1_SELECTED_BY = "not recorded (figures of schema version 1)"


def upgrade_figures(figures: pd.DataFrame, version: int) -> pd.DataFrame:
    """A figures table of an older version with the current columns: version 1 did not record the
    rule that picked each figure's shots (selected_by)."""
    if version < 2:
        figures = figures.assign(selected_by=VERSION_1_SELECTED_BY)
    return figures


def write_figure_tables(
    figures: list[Figure], caveats: list[dict], figures_path: Path, caveats_path: Path
) -> None:
    """figures.parquet and caveats.parquet, each with its schema's columns and version."""
    write_table([f.as_row() for f in figures], figure_table_schema(), figures_path)
    write_table(caveats, record_schema("caveats"), caveats_path)


def write_figures_from_files(
    shots_path: Path,
    bench_paths: list[Path],
    warm_fraction: float,
    figures_path: Path,
    caveats_path: Path,
    probe_paths: list[Path] = (),
    traffic_paths: list[Path] = (),
    after_paths: list[Path] = (),
    verdict_margin: float = VERDICT_MARGIN,
    verdict_level: float = LEVEL,
) -> None:
    """The compute_figures step, from the files the pipeline writes; `after_paths` are the engine
    kernels' second pass, each named as the probe of its machine."""
    bench_runs = [json.loads(Path(p).read_text()) for p in bench_paths]
    after = {Path(p).name: json.loads(Path(p).read_text()) for p in after_paths}
    probes = [merge_after(json.loads(Path(p).read_text()), after.get(Path(p).name, {})) for p in probe_paths]
    read = [json.loads(Path(p).read_text()) for p in traffic_paths]
    traffic = {t["model"]: t for t in read if "not_derivable" not in t}  # no ceiling for the rest
    figures, caveats = compute_figures(
        read_shots(shots_path), bench_runs, warm_fraction, probes, traffic, verdict_margin, verdict_level
    )
    write_figure_tables(figures, caveats, figures_path, caveats_path)
