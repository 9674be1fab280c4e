"""Task gates reach the figures (issue 16): a cell whose shots did not do the task carries
task_not_done on every figure that cites it, its speed-up is set apart in the report tables and
summary.md, and a speed-up that comes from the output repeating itself carries its own caveat."""

import pandas as pd

from tests.shot_tables import cell, series, table
from whichshot.figures.table import compute_figures
from whichshot.report.summary import render_summary


def recall(mode: str, kind: str = "real") -> dict:
    return cell(workload="verbatim_recall", text_kind=kind, prompt_tokens_requested=384, spec_mode=mode)


def explain(mode: str) -> dict:
    return cell(workload="explain", prompt_tokens_requested=None, spec_mode=mode)


def shots(decode: float, **quality) -> list[dict]:
    return [{"decode_tok_s": decode, **quality}] * 3


def run(*parts):
    figures, caveats = compute_figures(table(*parts), [], 0.7)
    return figures, {c["caveat_id"]: c for c in caveats}


def speedup(figures, **axes):
    (found,) = [
        f
        for f in figures
        if f.metric == "speedup_vs_none" and all(f.axes.get(a) == v for a, v in axes.items())
    ]
    return found


def test_a_cell_that_failed_its_gate_carries_the_caveat_and_a_passing_cell_does_not():
    done = {"task_done": True, "self_repetition": 0.0, "copy_fraction": 0.95}
    undone = {"task_done": False, "self_repetition": 0.1, "copy_fraction": 0.4}
    figures, caveats = run(
        series(recall("none"), shots(20.0, **done)),
        series(recall("ngram"), shots(40.0, **done)),
        series(recall("none", "synthetic"), shots(20.0, **done)),
        series(recall("ngram", "synthetic"), shots(35.0, **{**undone, "task_done": None})),
        series(recall("ngram", "synthetic"), shots(30.0, **undone), repeat=2),
    )
    assert "task_not_done" in caveats
    touched = set(caveats["task_not_done"]["figure_ids"])
    assert speedup(figures, text_kind="synthetic").figure_id in touched
    assert speedup(figures, text_kind="real").figure_id not in touched
    real = [f for f in figures if f.axes.get("text_kind") == "real" and f.axes.get("workload")]
    assert real and not any("task_not_done" in f.caveat_ids for f in real)
    assert "3 shot(s)" in caveats["task_not_done"]["sentence"]  # the None shots are not counted


def test_no_gate_failed_no_caveat():
    done = {"task_done": True}
    _figures, caveats = run(
        series(recall("none"), shots(20.0, **done)), series(recall("ngram"), shots(40.0, **done))
    )
    assert "task_not_done" not in caveats


def test_the_report_sets_apart_exactly_the_speed_ups_whose_cells_failed():
    ok = {"task_done": True}
    figures, caveats = run(
        series(recall("none"), shots(20.0, **ok)),
        series(recall("ngram"), shots(40.0, **ok)),
        series(explain("none"), shots(20.0, **ok)),
        series(explain("ngram"), shots(50.0, task_done=False)),
    )
    frame = pd.DataFrame([f.as_row() for f in figures])
    summary = render_summary(frame, pd.DataFrame(list(caveats.values())), "t")
    lines = summary.split("## Workloads × speculative modes")[1].split("\n## ")[0].splitlines()
    explain_row = next(line for line in lines if "| explain |" in line and "| ngram |" in line)
    recall_row = next(line for line in lines if "| verbatim_recall |" in line and "| ngram |" in line)
    (number,) = [line.split(".")[0] for line in summary.splitlines() if "**task_not_done**" in line]
    struck = explain_row.split(" | ")[7]  # the speed-up column, after the six axes and decode
    assert struck.startswith("✗ ~~2.50 D") and struck.endswith(f"[{number}]~~ gate failed")
    assert "✗" not in recall_row and recall_row.split(" | ")[7].startswith("2.00 D")


def test_a_speed_up_from_the_output_repeating_itself_is_caveated():
    looping = {"task_done": False, "self_repetition": 0.85, "copy_fraction": 0.05, "loop_detected": True}
    copying = {"task_done": True, "self_repetition": 0.4, "copy_fraction": 0.97}
    figures, caveats = run(
        series(explain("none"), shots(20.0, **looping)),
        series(explain("ngram"), shots(60.0, **looping)),
        series(recall("none"), shots(20.0, **copying)),
        series(recall("ngram"), shots(60.0, **copying)),
    )
    rule = caveats["speedup_from_self_repetition"]
    assert speedup(figures, workload="explain").figure_id in rule["figure_ids"]
    assert speedup(figures, workload="verbatim_recall").figure_id not in rule["figure_ids"]
    assert "self-repetition 85%" in rule["sentence"]


def test_a_slower_drafted_cell_is_no_speed_up_from_repetition():
    looping = {"self_repetition": 0.85, "copy_fraction": 0.05}
    _figures, caveats = run(
        series(explain("none"), shots(20.0, **looping)), series(explain("ngram"), shots(15.0, **looping))
    )
    assert "speedup_from_self_repetition" not in caveats


def test_the_synthetic_text_caveat_says_how_much_each_text_repeats_itself_on_this_run():
    _figures, caveats = run(
        series(recall("none"), shots(20.0, prompt_self_repetition=0.05)),
        series(recall("none", "synthetic"), shots(20.0, prompt_self_repetition=0.0)),
    )
    sentence = caveats["synthetic_text_in_use"]["sentence"]
    assert "repeat their own 8-token spans less than the real ones" in sentence and "0.0% vs 5.0%" in sentence
    _figures, caveats = run(
        series(recall("none"), shots(20.0, prompt_self_repetition=0.05)),
        series(recall("none", "synthetic"), shots(20.0, prompt_self_repetition=0.4)),
    )
    assert (
        "more than the real ones (median prompt_self_repetition 40.0% vs 5.0%)"
        in caveats["synthetic_text_in_use"]["sentence"]
    )
