"""figures.parquet's schema versions: a freshly derived table names, for every figure, the rule that
selected its shots (selected_by, version 2); a version 1 table (the committed reference runs) still
reads, with the column filled, wherever another run's figures are read (compare, claims)."""

import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from tests.shot_tables import cell, series, table
from whichshot.claims.run import run_tables, verdicts
from whichshot.figures.table import (
    VERSION_1_SELECTED_BY,
    compute_figures,
    read_figures,
    upgrade_figures,
    write_figure_tables,
)
from whichshot.report.compare import load_run
from whichshot.tables import record_schema

REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference" / "cpu_cost_model"


def test_a_derived_table_is_of_this_version_and_every_figure_names_its_rule(tmp_path):
    shots = table(series(cell(protocol="cold"), [{}, {}]), series(cell(), [{}] * 6))
    figures, caveats = compute_figures(shots, [], 0.7)
    write_figure_tables(figures, caveats, tmp_path / "figures.parquet", tmp_path / "caveats.parquet")
    version = pq.read_schema(tmp_path / "figures.parquet").metadata[b"schema_version"]
    assert int(version) == record_schema("figures")["x-schema-version"] == 2
    read = read_figures(tmp_path / "figures.parquet")
    assert read["selected_by"].tolist() == [f.selected_by for f in figures]
    assert read["selected_by"].str.len().min() > 0
    assert {"cold", "warm", "shot index", "source"} <= set(read["selected_by"])


def _version_1_run(tmp_path: Path) -> Path:
    """The reference as a version 1 run: its figures without selected_by, stamped version 1 (the
    committed references are re-derived with today's code, so none is version 1 any more)."""
    run = tmp_path / REFERENCE.name
    shutil.copytree(REFERENCE, run, ignore=shutil.ignore_patterns("report"))
    table = pq.read_table(run / "figures.parquet").drop(["selected_by"])
    metadata = {**(table.schema.metadata or {}), b"schema_version": b"1"}
    pq.write_table(table.replace_schema_metadata(metadata), run / "figures.parquet")
    return run


def test_a_version_1_table_reads_with_selected_by_filled(tmp_path):
    path = _version_1_run(tmp_path) / "figures.parquet"
    assert pq.read_schema(path).metadata[b"schema_version"] == b"1"
    as_stored = pd.read_parquet(path)
    assert "selected_by" not in as_stored
    read = read_figures(path)
    assert (read["selected_by"] == VERSION_1_SELECTED_BY).all()
    pd.testing.assert_frame_equal(read.drop(columns="selected_by"), as_stored)
    assert set(record_schema("figures")["properties"]) <= set(read.columns)


def test_a_current_table_is_left_as_it_is():
    current = pd.DataFrame({"figure_id": ["a"], "selected_by": ["warm"]})
    assert upgrade_figures(current, 2) is current


def test_compare_and_claims_read_a_version_1_run(tmp_path):
    version_1 = _version_1_run(tmp_path)
    run = load_run(version_1)
    assert (run.figures["selected_by"] == VERSION_1_SELECTED_BY).all()
    tables = run_tables(version_1)
    claims = Path(__file__).resolve().parents[1] / "claims" / "seed-000.yaml"
    assert verdicts([claims], tables["figures"], tables["shots"], tables["hardware"])
