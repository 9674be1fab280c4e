"""compare: two runs' headline figures, their ratios B/A and the factor each is attributed to, on the
committed references and on small made-up figures tables where the answer is known."""

import math
from pathlib import Path

import pandas as pd
import pytest

from tests.shot_tables import cell
from whichshot.compare import main
from whichshot.figures.cells import cell_id
from whichshot.report.compare import Run, compare_runs, load_run, render
from whichshot.report.render import write_report_from_files
from whichshot.shots.axes import AXES

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference"
GRID = cell(protocol="warm")
DRAFTED = cell(workload="edit_file", prompt_tokens_requested=None, spec_mode="ngram_simple")


def _reference_pair() -> tuple[Run, Run]:
    return load_run(REFERENCE / "cpu_first_run"), load_run(REFERENCE / "cpu_default")


def _value(figures: pd.DataFrame, metric: str, cell_key: str) -> float:
    rows = figures[
        (figures["metric"] == metric) & (figures["cell_id"] == cell_key) & figures["shot_index"].isna()
    ]
    assert len(rows) == 1, (metric, cell_key)
    return float(rows["value"].iloc[0])


def test_the_references_ratios_are_recomputable_from_their_figures_tables():
    a, b = _reference_pair()
    table = compare_runs(a, b)
    assert set(table["figure"]) == {"decode_tok_s", "prefill_tok_s", "speedup_vs_none"}
    assert len(table) >= 7
    for row in table.to_dict("records"):
        value_a, value_b = (
            _value(a.figures, row["figure"], row["cell"]),
            _value(b.figures, row["figure"], row["cell"]),
        )
        assert (row["a"], row["b"]) == (value_a, value_b)
        assert row["ratio"] == pytest.approx(value_b / value_a, rel=1e-12)
    speedups = table[table["figure"] == "speedup_vs_none"]
    for row in speedups.to_dict("records"):
        acceptance = [_value(run.figures, "acceptance_rate", row["cell"]) for run in (a, b)]
        assert row["acceptance"] == pytest.approx(acceptance[1] / acceptance[0], rel=1e-12)
    # cpu_default ran no hardware probe: its bandwidth is not measured, never a made-up ratio
    assert table["bandwidth"].isna().all()
    assert all(row["not_measured"]["bandwidth"] == "not measured in B" for row in table.to_dict("records"))


def test_the_references_host_load_is_the_median_over_each_figures_shots():
    a, b = _reference_pair()
    row = compare_runs(a, b).iloc[0]
    for run, column in ((a, "host_load_a"), (b, "host_load_b")):
        cited = run.figures[
            (run.figures["cell_id"] == row["cell"]) & (run.figures["metric"] == row["figure"])
        ]
        ids = set(cited["shot_ids"].iloc[0])
        assert row[column] == run.shots[run.shots["shot_id"].isin(ids)]["host_foreign_cores"].median()


def _figure(metric: str, value: float | None, of: dict | None = None, shot_ids: tuple[str, ...] = ()) -> dict:
    axes = {axis: (of or {}).get(axis) for axis in AXES}
    key = cell_id(of) if of else ""
    kind = "derived" if of else "measured"
    return {"figure_id": f"{key}/{metric}", "metric": metric, "value": value, "kind": kind,
            "shot_index": math.nan, "shot_ids": list(shot_ids), "cell_id": key, "formula": f"{metric} probe",
            **axes}  # fmt: skip


def _run(
    name: str,
    speedup: float,
    acceptance: float,
    predicted: float | None,
    verify: float | None,
    decode: float = 100.0,
    bandwidth: float = 25e9,
    foreign: float = 0.0,
    cores: int = 2,
) -> Run:
    """A made-up run: one protocol cell's decode and one drafted cell's speed-up with its factors."""
    shots = [f"{name}/shot{i}" for i in range(3)]
    figures = [
        _figure("cpu_copy_bandwidth_bytes_s", bandwidth),
        _figure("decode_tok_s", decode, GRID, tuple(shots)),
        _figure("speedup_vs_none", speedup, DRAFTED, tuple(shots)),
        _figure("acceptance_rate", acceptance, DRAFTED),
        _figure("verify_cost_ratio", verify, DRAFTED),
        _figure("predicted_speedup_vs_none", predicted, DRAFTED),
    ]
    rows = {"shot_id": shots, "status": "ok", "host_foreign_cores": foreign, "cpu_count": cores, "threads": 2}
    return Run(name, pd.DataFrame(figures), pd.DataFrame(rows))


def _speedup_row(a: Run, b: Run) -> pd.Series:
    table = compare_runs(a, b)
    return table[table["figure"] == "speedup_vs_none"].iloc[0]


def test_the_verify_cost_explains_a_speedup_difference_at_the_same_acceptance():
    # the two machines: the same acceptance, x3.31 against x1.64, the verify cost twice as dear
    a = _run("intel", 3.31, 0.80, predicted=3.2, verify=1.1)
    b = _run("amd", 1.64, 0.81, predicted=1.7, verify=2.3)
    row = _speedup_row(a, b)
    assert row["factor"] == "verify cost", row["why"]
    assert row["verify_cost"] == pytest.approx(2.3 / 1.1)
    assert row["ratio"] == pytest.approx(1.64 / 3.31)
    assert "| verify cost |" in render(compare_runs(a, b), "A", "B")


def test_a_prediction_that_misses_or_a_different_acceptance_is_not_the_verify_cost():
    a = _run("a", 3.31, 0.80, predicted=3.2, verify=1.1)
    missed = _run("b", 1.64, 0.81, predicted=3.1, verify=1.2)
    assert _speedup_row(a, missed)["factor"] == "unexplained"
    fewer = _run("b", 1.64, 0.50, predicted=1.7, verify=2.3)
    assert _speedup_row(a, fewer)["factor"] == "acceptance"
    older = _run("b", 1.64, 0.81, predicted=None, verify=None)
    row = _speedup_row(a, older)
    assert row["factor"] == "unexplained" and "verify cost not measured in B" in row["why"]
    assert row["not_measured"]["verify_cost"] == "not measured in B"


def test_decode_follows_bandwidth_and_host_load_is_flagged_by_the_busy_threshold():
    a = _run("a", 2.0, 0.8, 2.0, 1.0)
    slow = _run("b", 2.0, 0.8, 2.0, 1.0, decode=52.0, bandwidth=12.5e9, foreign=0.3)
    decode = compare_runs(a, slow).query("figure == 'decode_tok_s'").iloc[0]
    assert decode["factor"] == "memory bandwidth" and decode["bandwidth"] == pytest.approx(0.5)
    assert decode["host_busy"] and "host load flagged" in decode["why"]  # 0.3 cores beside 2 threads on 2
    roomy = _run("b", 2.0, 0.8, 2.0, 1.0, decode=52.0, bandwidth=25e9, foreign=0.3, cores=64)
    decode = compare_runs(a, roomy).query("figure == 'decode_tok_s'").iloc[0]
    assert decode["factor"] == "unexplained" and not decode["host_busy"]


def test_the_command_prints_the_table_and_writes_it(tmp_path, capsys):
    out = tmp_path / "compare.md"
    text = main([str(REFERENCE / "cpu_first_run"), str(REFERENCE / "cpu_default"), "--out", str(out)])
    assert capsys.readouterr().out == text == out.read_text()
    assert "| decode_tok_s |" in text and "Rule:" in text


def test_the_report_sets_the_run_against_another_when_asked(tmp_path):
    """report.compare_with: the rendered page carries the comparison table, one row per headline
    figure both runs hold, with the ratio B/A the command prints."""
    run = REFERENCE / "cpu_first_run"
    paths = {name: run / f"{name}.parquet" for name in ("figures", "caveats", "shots", "claims")}
    paths["builds"] = sorted(run.glob("engines/*/build.json"))
    paths["models"] = sorted(run.glob("models/*.json"))
    other = str(REFERENCE / "cpu_default")
    write_report_from_files(paths, tmp_path, "cpu-first-run", compare_with=other)
    page = (tmp_path / "index.html").read_text()
    table = compare_runs(load_run(Path(other)), load_run(run))
    assert 'id="compare"' in page and len(table) >= 7
    assert page.count("<tr><td>decode_tok_s</td>") == (table["figure"] == "decode_tok_s").sum()
    first = table.iloc[0]
    assert f"x{first['ratio']:.3f}" in page
    write_report_from_files(paths, tmp_path / "alone", "cpu-first-run")
    assert 'id="compare"' not in (tmp_path / "alone" / "index.html").read_text()
