"""Gates follow every figure (issue 32): a drafted speed-up whose task gate failed, or whose output was
not lossless, is never a win: not a plain ×N bar or point in the plots (checked on the matplotlib
objects drawn), not an unstruck value in the speed-up tables, and not a match in a claim verdict."""

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from tests.shot_tables import cell, series, table
from whichshot.claims.check import check_claims
from whichshot.claims.load import Claim
from whichshot.figures.table import compute_figures
from whichshot.report import plots
from whichshot.report.layout import lay_out
from whichshot.report.render import render_report
from whichshot.report.summary import cell_markdown
from whichshot.report.tables import build_tables

DONE = {"task_done": True, "lossless_vs_none": True, "first_divergence_token": None, "copy_fraction": 0.9}


def drafted_pair(workload: str, drafted: dict) -> list[list[dict]]:
    """A no-draft cell at 20 tok/s and its ngram cell at 23 tok/s (×1.15) with `drafted` quality."""
    base = cell(workload=workload, prompt_tokens_requested=None)
    return [
        series({**base, "spec_mode": "none"}, [{"decode_tok_s": 20.0, **DONE, "lossless_vs_none": None}] * 3),
        series({**base, "spec_mode": "ngram"}, [{"decode_tok_s": 23.0, **DONE, **drafted}] * 3),
    ]


@pytest.fixture(scope="module")
def figures() -> pd.DataFrame:
    parts = [
        *drafted_pair("needle", {}),  # passes both gates: the one plain ×1.15
        *drafted_pair("explain", {"task_done": False}),  # ×1.15, but the task gate failed
        *drafted_pair("new_code", {"lossless_vs_none": False, "first_divergence_token": 3}),  # lossy
    ]
    found, _caveats = compute_figures(table(*parts), [], 0.7)
    return pd.DataFrame([f.as_row() for f in found])


def speedup_row(figures: pd.DataFrame, workload: str) -> dict:
    rows = figures[(figures["metric"] == "speedup_vs_none") & (figures["workload"] == workload)]
    (row,) = rows.to_dict("records")
    return row


def test_the_run_holds_the_three_speed_ups_with_their_caveats(figures):
    for workload in ("needle", "explain", "new_code"):
        assert speedup_row(figures, workload)["value"] == pytest.approx(1.15)
    assert "task_not_done" in list(speedup_row(figures, "explain")["caveat_ids"])
    assert "lossless_check_failed" in list(speedup_row(figures, "new_code")["caveat_ids"])
    assert not {"task_not_done", "lossless_check_failed"} & set(speedup_row(figures, "needle")["caveat_ids"])


def test_no_gated_speed_up_is_drawn_as_a_plain_bar(figures):
    fig = plots.workload_modes(figures)
    (axis,) = fig.axes
    labels = [t.get_text() for t in axis.texts]
    plt.close(fig)
    assert labels.count("×1.15") == 1  # the needle cell only
    assert sorted(label for label in labels if label.startswith("✗")) == ["✗ gate failed", "✗ lossy"]
    struck = [p for p in axis.patches if (p.get_gid() or "").startswith("gated")]
    assert sorted(p.get_gid() for p in struck) == ["gated: gate failed", "gated: lossy"]
    assert all(p.get_hatch() == plots.GATED_HATCH for p in struck)


def test_no_gated_speed_up_is_a_plain_point(figures):
    fig = plots.copy_vs_speedup(figures)
    (axis,) = fig.axes
    annotations = [t.get_text() for t in axis.texts]
    crosses = [c for c in axis.collections if (c.get_gid() or "").startswith("gated")]
    plt.close(fig)
    assert "explain (warm) ✗ gate failed" in annotations and "new_code (warm) ✗ lossy" in annotations
    assert "needle (warm)" in annotations
    assert [c.get_gid() for c in crosses] == ["gated: gate failed, lossy"]  # one mode, one text kind
    assert sorted(crosses[0].get_offsets()[:, 1]) == pytest.approx([1.15, 1.15])  # two points struck


def speedup_cells(figures: pd.DataFrame, key: str, named_by: str) -> dict:
    """Each drafted row's speed-up cell of one laid-out table, by the axis value named_by (the row's
    first cells are its axes in words)."""
    (table,) = [t for t in lay_out(build_tables(figures), {}) if t.spec.key == key]
    headers = [c.header for c in table.spec.columns]
    at, speedup = headers.index(named_by), headers.index("speed-up over none")
    cells = {row.cells[at].lines[0][0].text: row.cells[speedup] for row in table.rows}
    return {name: cell for name, cell in cells.items() if not cell.missing}


def test_no_table_cell_shows_an_unstruck_gated_speed_up(figures):
    cells = speedup_cells(figures, "workloads", "workload")
    assert cells["explain"].struck and cells["new_code"].struck and not cells["needle"].struck
    text = {workload: cell_markdown(cell) for workload, cell in cells.items()}
    assert text["explain"] == "✗ ~~1.15 D~~ gate failed"  # no caveat numbers given: none shown
    assert text["new_code"] == "✗ ~~1.15 D~~ lossy"
    assert "gate failed: task not done" in cells["explain"].hover
    assert "lossy: output not lossless" in cells["new_code"].hover
    assert text["needle"] == "1.15 D"


def claim(workload: str) -> Claim:
    where = {"workload": workload, "spec_mode": "ngram", "protocol": "warm"}
    return Claim("c", "f", "a post", "x1.15", 1.15, "x", "speedup_vs_none", "relative", where=where)


def test_a_claim_that_would_match_on_a_gated_cell_is_not_a_match(figures):
    verdicts = {w: v for w, v in zip(("needle", "explain", "new_code"),
                                      check_claims([claim(w) for w in ("needle", "explain", "new_code")],
                                                   figures, []), strict=True)}  # fmt: skip
    assert verdicts["needle"]["status"] == "matches"
    for workload, why in (("explain", "task not done"), ("new_code", "not lossless")):
        verdict = verdicts[workload]
        assert verdict["status"] == "not comparable here", verdict["verdict"]
        assert "gated out" in verdict["verdict"] and why in verdict["verdict"]
        assert verdict["readings_compared"] == 0 and verdict["readings_within"] == 0


# --- a nominal clock: the clock-ratio check and its claims are not checkable here ---------------


def nominal_clock_run() -> pd.DataFrame:
    """A cold and a warm cell on a machine whose CPU clock was only nominal (not measured)."""
    unmeasured = {"prefill_tok_s": 100.0, "telemetry_not_measured": "cpu_energy_j|cpu_freq_mhz|cpu_temp_c"}
    warm, cold = cell(prompt_tokens_requested=4096), cell(prompt_tokens_requested=4096, protocol="cold")
    found, _caveats = compute_figures(
        table(series(cold, [unmeasured] * 3), series(warm, [unmeasured] * 6)), [], 0.7
    )
    return pd.DataFrame([f.as_row() for f in found])


def test_a_nominal_clock_makes_the_clock_ratio_check_not_checkable_here():
    figures = nominal_clock_run()
    residual = figures[figures["metric"] == "decode_tok_s_clock_residual"].to_dict("records")
    assert len(residual) == 1 and pd.isna(residual[0]["value"])
    assert residual[0]["note"].startswith("not checkable here: the CPU clock was not measured")
    assert "nominal" in residual[0]["note"]
    assert not figures[figures["metric"] == "cpu_freq_median_mhz"]["value"].notna().any()


def test_a_claim_resting_on_a_nominal_clock_is_not_checkable_here():
    claims = [Claim("c", "f", "a post", "warm is the clock", 0.0, "fraction", "decode_tok_s_clock_residual",
                    "relative", where={"protocol": "warm"})]  # fmt: skip
    (verdict,) = check_claims(claims, nominal_clock_run(), [])
    assert verdict["status"] == "not comparable here"
    assert verdict["verdict"].startswith(
        "not comparable here: not checkable here: the CPU clock was not measured"
    )


# --- a trace: each request's speed-up follows the same gate ---------------------------------------


def trace_request(request_id: str, mode: str, values: dict) -> list[dict]:
    of = cell(workload="trace", trace="t", request_id=request_id, spec_mode=mode, protocol="cold",
              prompt_tokens_requested=None)  # fmt: skip
    return series(of, [{"output_tokens": 100, **values}] * 2)


def test_a_trace_request_whose_output_is_lossy_has_its_speed_up_struck():
    base = {"decode_tok_s": 20.0, "lossless_vs_none": None}
    faithful = {"decode_tok_s": 23.0, "lossless_vs_none": True, "first_divergence_token": None}
    lossy = {"decode_tok_s": 23.0, "lossless_vs_none": False, "first_divergence_token": 3}
    shots = table(trace_request("r1", "none", base), trace_request("r2", "none", base),
                  trace_request("r1", "ngram", faithful), trace_request("r2", "ngram", lossy))  # fmt: skip
    found, caveats = compute_figures(shots, [], 0.7)
    frame = pd.DataFrame([f.as_row() for f in found])
    cells = speedup_cells(frame, "trace-requests", "request")
    assert cells["r2"].struck and cells["r2"].lines[0][-1].text == "lossy" and not cells["r1"].struck
    runs = {"builds": [], "models": []}
    html = render_report(frame, pd.DataFrame(caveats), shots, runs, [], "t")
    struck = html.split('<td class="n apart" title="')[1:]
    assert len(struck) == 1 and struck[0].startswith("lossy: output not lossless")
    assert cells["r2"].lines[0][1].figure_id in struck[0].split("</td>")[0]
    assert '<span class="gate">lossy</span>' in struck[0].split("</td>")[0]
