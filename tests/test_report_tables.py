"""The report's table layout on figures computed from hand-made shots: nothing dropped, rows are cells
read from the axis columns, seed 002's row order, engines side by side."""

import pandas as pd

from tests.shot_tables import cell, series, table
from whichshot.figures.table import compute_figures
from whichshot.report.format import format_bare, format_lossless, format_value
from whichshot.report.render import output_samples
from whichshot.report.tables import build_tables


def figure_table(*parts, bench=None) -> pd.DataFrame:
    figures, _caveats = compute_figures(table(*parts), bench or [], 0.7)
    return pd.DataFrame([f.as_row() for f in figures])


def recall(engine: str, mode: str, protocol: str = "cold") -> dict:
    return cell(engine=engine, workload="verbatim_recall", prompt_tokens_requested=384, spec_mode=mode,
                protocol=protocol)  # fmt: skip


def test_every_figure_lands_in_a_table():
    clocks = {"sm_clock_median_mhz": 1800.0, "sm_clock_min_mhz": 1790.0, "thermal_throttle_seen": False}
    bench = [
        {
            "engine": "eng",
            "model": "m",
            "rows": [
                {
                    "test": "pp",
                    "n_prompt": 64,
                    "n_gen": 0,
                    "avg_tok_s": 600.0,
                    "std_tok_s": 1.0,
                    "repetitions": 3,
                }
            ],
        }
    ]
    figures = figure_table(
        series(cell(protocol="cold"), [clocks] * 2), series(cell(), [clocks] * 6),
        series(recall("eng", "none"), [{"recall_exact": True}]),
        series(recall("eng", "ngram"), [{"recall_exact": False, "lossless_vs_none": True}]),
        bench=bench,
    )  # fmt: skip
    tables = build_tables(figures)
    assert tables.shown_ids == set(figures["figure_id"])
    assert not next((s for s in tables.sections if s.key == "other"), None)  # every metric has its table
    assert tables.run is not None and tables.run["value"] == 10
    assert [r["protocol"] for r in tables.headline] == ["cold", "warm"]
    assert tables.headline[1]["which_shot"] == "warm · shots 3-6 · 0 s rest"
    assert tables.series.indices == [1, 2, 3, 4, 5, 6]
    assert {r["metric"] for r in tables.inferred} >= {"prefill_tok_s_clock_predicted"}


def test_workload_rows_put_the_no_draft_mode_first_and_group_cells():
    figures = figure_table(
        series(recall("eng", "ngram_mod"), [{}]), series(recall("eng", "none"), [{}]),
        series(recall("eng", "ngram_mod", "warm"), [{}, {}]), series(recall("eng", "none", "warm"), [{}, {}]),
    )  # fmt: skip
    rows = build_tables(figures).workloads
    assert [(r["protocol"], r["spec_mode"]) for r in rows] == [
        ("cold", "none"), ("cold", "ngram_mod"), ("warm", "none"), ("warm", "ngram_mod")]  # fmt: skip
    assert [r["group_start"] for r in rows] == [True, False, True, False]
    assert "speedup_vs_none" in rows[1]["cells"] and "speedup_vs_none" not in rows[0]["cells"]


def test_engine_table_sets_engines_side_by_side_per_mode():
    figures = figure_table(
        series(recall("llama", "none"), [{}]), series(recall("llama", "ngram"), [{}]),
        series(recall("hf", "none"), [{}]), series(recall("hf", "lookup"), [{}]),
    )  # fmt: skip
    (table,) = build_tables(figures).sides
    assert table.sides == ["llama", "hf"] and table.reference == "llama" and table.others == ["hf"]
    assert [r["spec_mode"] for r in table.rows] == ["none", "ngram", "lookup"]  # no drafting first
    none = table.rows[0]["cells"]
    assert {("llama", "decode_tok_s"), ("hf", "decode_tok_s"), ("hf", "xengine_decode_ratio")} <= set(none)
    assert ("llama", "decode_tok_s") not in table.rows[2]["cells"]  # llama has no lookup mode


def test_formats():
    assert format_value({"value": 0.4321, "unit": "fraction"}) == "43.2 %"
    assert format_value({"value": 2.5, "unit": "ratio"}) == "×2.500"
    assert format_value({"value": None, "unit": "tok/s"}) == "not measured"
    assert format_bare({"value": 0.0163, "unit": "ratio"}) == "0.016"
    assert format_bare({"value": 1.404, "unit": "ratio"}) == "1.40"
    assert format_bare({"value": 6.0, "unit": "shots"}) == "6"
    lossless = {"value": 1 / 3, "shot_ids": ["a", "b", "c"], "note": "first diverging token 12 in a"}
    assert format_lossless(lossless) == "1/3 identical; diverges at token 12"


def test_a_model_that_runs_the_grid_and_a_workload_shows_an_output_of_each():
    shots = table(
        series(cell(protocol="cold"), [{"output_text": "the grid's continued text"}] * 2),
        series(recall("eng", "none"), [{"output_text": "the recalled document"}]),
    )
    samples = output_samples(shots)
    assert [s["text"] for s in samples] == ["the grid's continued text", "the recalled document"]
    assert [(s["model"], s["workload"]) for s in samples] == [
        ("m", "continue_text"),
        ("m", "verbatim_recall"),
    ]
