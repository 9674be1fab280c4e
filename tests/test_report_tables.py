"""The report's table layout on hand-made figure rows: nothing dropped, seed 002's row order."""

import pandas as pd

from whichshot.report.format import format_bare, format_lossless, format_value
from whichshot.report.tables import build_tables
from whichshot.which_shot import index_ranges


def figure(figure_id: str, metric: str, **fields) -> dict:
    row = {"figure_id": figure_id, "value": 1.5, "unit": "tok/s", "kind": "derived", "formula": "f",
           "engine": "eng", "model": "m", "prompt_tokens": 64.0, "protocol": "warm", "metric": metric,
           "shot_ids": ["s1"], "shot_indices": "shots 2-3", "rest_s": 0.0, "series_label": "eng.m.p64.warm",
           "note": "", "timed_by": "whichshot client", "caveat_ids": [], "workload": "continue_text",
           "text_kind": "real", "spec_mode": "none", "source": "1 shot(s)",
           "which_shot": "warm; timed by x"}  # fmt: skip
    row.update(fields)
    return row


def workload_rows() -> list[dict]:
    rows = []
    for mode in ("ngram_mod", "none"):
        label = f"eng.m.recall-real.warm-rest0s.ctx1024.{mode}"
        common = {"workload": "recall", "spec_mode": mode, "series_label": label}
        rows.append(figure(f"{label}/decode_tok_s", "decode_tok_s", **common))
        if mode != "none":
            rows.append(figure(f"{label}/speedup_vs_none", "speedup_vs_none", unit="ratio", **common))
    return rows


def test_every_figure_lands_in_a_table_and_unknown_metrics_are_kept():
    ratio = "client_vs_engine_decode_ratio"
    rows = [figure("eng/m/p64/warm/decode_tok_s", "decode_tok_s"),
            figure(f"eng/m/all/{ratio}", ratio, protocol="all"),
            figure("eng/m/x/novel_metric", "novel_metric", kind="inferred"),
            figure("eng/m/x/xengine_decode_ratio", "xengine_decode_ratio"),
            *workload_rows()]  # fmt: skip
    tables = build_tables(pd.DataFrame(rows))
    assert tables.shown_ids == {r["figure_id"] for r in rows}
    other = next(s for s in tables.sections if s.key == "other")
    assert [r["metric"] for r in other.rows] == ["novel_metric"]
    assert [r["metric"] for r in tables.inferred] == ["novel_metric"]
    assert [list(r["cells"]) for r in tables.engines.rows] == [[("eng", "xengine_decode_ratio")]]
    assert len(tables.headline) == 1 and tables.headline[0]["which_shot"] == "warm · shots 2-3 · 0 s rest"


def test_workload_rows_put_the_no_draft_mode_first_and_group_cells():
    tables = build_tables(pd.DataFrame(workload_rows()))
    assert [r["spec_mode"] for r in tables.workloads] == ["none", "ngram_mod"]
    assert [r["group_start"] for r in tables.workloads] == [True, False]
    assert "speedup_vs_none" in tables.workloads[1]["cells"]


def engine_rows() -> list[dict]:
    """Two engines on one workload: each ran no drafting and its own mode (llama: ngram, hf: lookup)."""
    rows = []
    for engine, mode in (("llama", "none"), ("llama", "ngram"), ("hf", "none"), ("hf", "lookup")):
        label = f"{engine}.m.recall-real.cold.ctx1024.{mode}"
        common = {"engine": engine, "workload": "recall", "spec_mode": mode, "series_label": label,
                  "protocol": "cold"}  # fmt: skip
        rows.append(figure(f"{label}/xengine_decode_tok_s", "xengine_decode_tok_s", **common))
        if engine == "hf" and mode == "none":
            rows.append(figure(f"{label}/xengine_decode_ratio", "xengine_decode_ratio", unit="ratio",
                               note="vs llama", **common))  # fmt: skip
    return rows


def test_engine_table_sets_engines_side_by_side_per_mode():
    table = build_tables(pd.DataFrame(engine_rows())).engines
    assert table.engines == ["llama", "hf"] and table.reference == "llama" and table.others == ["hf"]
    assert [r["spec_mode"] for r in table.rows] == ["none", "lookup", "ngram"]  # no drafting first
    assert [r["group_start"] for r in table.rows] == [True, False, False]
    none = table.rows[0]["cells"]
    assert set(none) == {("llama", "xengine_decode_tok_s"), ("hf", "xengine_decode_tok_s"),
                         ("hf", "xengine_decode_ratio")}  # fmt: skip
    assert set(table.rows[1]["cells"]) == {("hf", "xengine_decode_tok_s")}  # llama has no lookup mode


def test_formats():
    assert format_value({"value": 0.4321, "unit": "fraction"}) == "43.2 %"
    assert format_value({"value": 2.5, "unit": "ratio"}) == "×2.500"
    assert format_value({"value": None, "unit": "tok/s"}) == "not measured"
    assert format_bare({"value": 0.0163, "unit": "ratio"}) == "0.016"
    assert format_bare({"value": 1.404, "unit": "ratio"}) == "1.40"
    lossless = {"value": 1 / 3, "shot_ids": ["a", "b", "c"], "note": "first diverging token 12 in a"}
    assert format_lossless(lossless) == "1/3 identical; diverges at token 12"
    assert index_ranges([5, 1, 2, 3]) == "1-3, 5"
