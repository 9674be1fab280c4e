"""The answer block (issues 32, 41 and 49): one verdict per quantity (prefill with TTFT beside it,
decode) for each warm cell, shot 1 against the warm shots paired inside each process (or against
separate cold processes where the warm series have no shot 1); the sentence says per cell what moved,
its direction and size, and what the run cannot tell; rows a table strikes are struck here too; per
workload the best mode among those no gate strikes, by the same rule the tables strike by. Built from
figures computed from hand-made shots."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import whichshot.report
from tests.shot_tables import cell, series, table
from whichshot.figures.answer_figures import (
    BEST_MODE,
    COLD_WARM_DELTA,
    MODES_PASSING,
    cold_vs_warm,
)
from whichshot.figures.comparison import interval_metrics, range_metrics
from whichshot.figures.table import compute_figures
from whichshot.figures.verdict import DIFFERS, PAIRED_METHOD, TOO_FEW, UNDECIDED, paired_log_interval
from whichshot.report.answer import CANNOT_TELL, STRUCK, answer_block, answer_markdown
from whichshot.report.layout import lay_out
from whichshot.report.summary import render_summary
from whichshot.report.tables import build_tables
from whichshot.report.templating import ENV

WARM, COLD = cell(protocol="warm"), cell(protocol="cold")
SAME = "same within ±2 %"


def figure_frame(*parts) -> pd.DataFrame:
    figures, _caveats = compute_figures(table(*parts), [], 0.7, verdict_margin=0.02)
    return pd.DataFrame([f.as_row() for f in figures])


def speeds(*values: float, **common) -> list[dict]:
    return [{"decode_tok_s": v, **common} for v in values]


def by_metric(frame: pd.DataFrame, metric: str) -> dict:
    rows = frame[frame["metric"] == metric]
    assert len(rows) == 1, (metric, len(rows))
    return rows.iloc[0].to_dict()


# Three warm series (processes): shot 1, the process's cold shot, at about 30 tok/s; its warm shots
# at about 50.
PAIRED = (
    series(WARM, speeds(30.0, 50.0, 51.0, 50.0, 50.5)),
    series(WARM, speeds(31.0, 49.5, 50.5, 50.0, 49.0), repeat=2),
    series(WARM, speeds(29.0, 50.5, 50.0, 49.5, 50.5), repeat=3),
)


def test_shot_1_is_paired_with_its_own_processs_warm_shots():
    frame = figure_frame(*PAIRED)
    delta = by_metric(frame, COLD_WARM_DELTA)
    low, high, verdict = (by_metric(frame, m) for m in interval_metrics(COLD_WARM_DELTA))
    # per process: log(shot 1) - log(median of shots 2-5 (the last 70 % of 5)); Student's t over the 3
    warm_medians = (50.25, 49.75, 50.25)
    d = np.log([30.0, 31.0, 29.0]) - np.log(warm_medians)
    point, want_low, want_high = paired_log_interval(d)
    assert delta["value"] == pytest.approx(np.expm1(point))
    assert (low["value"], high["value"]) == pytest.approx((np.expm1(want_low), np.expm1(want_high)))
    assert verdict["note"] == DIFFERS and '"paired": true' in delta["parameters"]
    assert delta["baseline_cell_id"] == "" and PAIRED_METHOD in low["formula"]
    assert by_metric(frame, f"{cold_vs_warm('prefill_tok_s')}_verdict")["note"] == SAME  # every shot alike
    assert "ttft_s_cold_vs_warm_delta" in set(frame["metric"])  # TTFT: a number beside prefill
    assert "ttft_s_cold_vs_warm_delta_verdict" not in set(frame["metric"])  # never a verdict of its own
    block = answer_block(frame)
    assert [row["texts"][1] for row in block.cells] == ["prefill", "decode"]
    decode = block.cells[1]
    assert decode["texts"][2:4] == ["30.0 [29.0-31.0] (3)", "50.2 [49.8-50.2] (3)"]
    assert (
        decode["texts"][4].startswith(f"{delta['value'] * 100:+.1f} % [-") and decode["texts"][5] == DIFFERS
    )
    assert block.cells[0]["texts"][6] == "+0.0 %"  # TTFT beside prefill
    assert block.method.startswith("shot 1 against warm: paired inside each process")
    assert "Warm series: each warm series' warm shots (shot 2 on): the Theil-Sen drift" in block.method


def test_the_sentence_says_phase_direction_size_and_interval():
    frame = figure_frame(*PAIRED)
    block = answer_block(frame)
    low, high = (by_metric(frame, m)["value"] for m in interval_metrics(COLD_WARM_DELTA)[:2])
    delta = by_metric(frame, COLD_WARM_DELTA)["value"]
    decode = f"decode {abs(delta) * 100:.1f} % slower [{abs(high) * 100:.1f} %, {abs(low) * 100:.1f} %]"
    assert block.sentence == (
        f"The first (cold) shot against the warm shots — prefill the same within ±2 % [+0.0 %, +0.0 %]; "
        f"{decode}."
    )
    markdown = "\n".join(answer_markdown(block))
    assert markdown.startswith("## Answer\n\nThe first (cold) shot against the warm shots")
    assert "| eng · m · p64 · ctx 512 | decode | 30.0 \\[29.0-31.0\\] (3) |" in markdown


def test_two_cells_each_name_what_moved():
    # seed 000's question: the first shot's prefill is slower (one-time work), decode is not
    def warm(prompt: int, r: int, first: float) -> list[dict]:
        prefill = (first + r, *[21_000.0 + 10 * r + i for i in range(4)])
        return series(cell(protocol="warm", prompt_tokens_requested=prompt),
                      [{"prefill_tok_s": v, "decode_tok_s": 51.0 + r * 0.05 + i * 0.01}
                       for i, v in enumerate(prefill)], repeat=r)  # fmt: skip

    frame = figure_frame(
        *[warm(64, r, 14_000.0) for r in (1, 2, 3)], *[warm(256, r, 18_000.0) for r in (1, 2, 3)]
    )
    sentence = answer_block(frame).sentence
    at64, at256 = sentence.split(". ")
    assert "p64: prefill 33." in at64 and "% slower [" in at64  # the axes the two cells share are left out
    assert at256.startswith("p256: prefill 14.") and "% slower [" in at256
    assert "decode the same within ±2 %" in at64 and "decode the same within ±2 %" in at256


def test_a_recorded_run_with_three_pairs_a_cell_names_each_cell_phase_and_resolution():
    """cpu_first_run's shots (three warm series a cell, p256 and p512) through this code: paired, every
    verdict undecided on the shared VM, and the sentence gives each cell's and phase's resolution."""
    shots = pd.read_parquet(
        Path(__file__).resolve().parents[1] / "results/reference/cpu_first_run/shots.parquet"
    )
    figures, _caveats = compute_figures(shots, [], 0.7, verdict_margin=0.02)
    frame = pd.DataFrame([f.as_row() for f in figures])
    block = answer_block(frame)
    for row in block.cells:
        low, high = (
            by_metric_of(frame, row["cell_id"], m)["value"]
            for m in interval_metrics(cold_vs_warm(row["phase"]))[:2]
        )
        assert row["paired"] and row["verdict"] == UNDECIDED
        beyond = f"{row['texts'][1]}: no difference beyond ±{max(abs(low), abs(high)) * 100:.1f} %"
        prompt = f"p{row['label'].split(' · p')[1].split(' ')[0]}"
        assert beyond in block.sentence.split(f"{prompt}: ")[1].split(". ")[0], (beyond, block.sentence)


def by_metric_of(frame: pd.DataFrame, cell_id: str, metric: str) -> dict:
    rows = frame[(frame["metric"] == metric) & (frame["cell_id"] == cell_id)]
    assert len(rows) == 1, (cell_id, metric, len(rows))
    return rows.iloc[0].to_dict()


def test_an_undecided_verdict_says_the_largest_difference_the_run_cannot_rule_out():
    noisy = [series(WARM, speeds(first, 50.0, 50.0, 50.0), repeat=r)
             for r, first in ((1, 45.0), (2, 52.0), (3, 49.0))]  # fmt: skip
    frame = figure_frame(*noisy)
    assert by_metric(frame, f"{COLD_WARM_DELTA}_verdict")["note"] == UNDECIDED
    low, high = (by_metric(frame, m)["value"] for m in interval_metrics(COLD_WARM_DELTA)[:2])
    beyond = max(abs(low), abs(high)) * 100
    sentence = answer_block(frame).sentence
    assert f"decode: no difference beyond ±{beyond:.1f} %" in sentence and CANNOT_TELL in sentence


def test_one_warm_process_is_too_few_and_its_own_ratio_is_the_range():
    frame = figure_frame(PAIRED[0])
    verdict = by_metric(frame, f"{COLD_WARM_DELTA}_verdict")
    assert pd.isna(verdict["value"]) and verdict["note"] == TOO_FEW
    span_low, span_high = (by_metric(frame, m)["value"] for m in range_metrics(COLD_WARM_DELTA))
    assert span_low == span_high == pytest.approx(30.0 / 50.25 - 1)
    assert "decode: too few processes to tell" in answer_block(frame).sentence


def test_without_a_shot_1_in_the_warm_series_the_separate_cold_processes_are_compared_unpaired():
    cold = series(COLD, speeds(30.0, 31.0, 29.0))
    warms = [series(WARM, [None, *speeds(50.0 + r, 50.5, 49.5, 50.0)], repeat=r) for r in (1, 2, 3)]
    frame = figure_frame(cold, *warms)
    delta = by_metric(frame, COLD_WARM_DELTA)
    assert '"paired"' not in delta["parameters"] and delta["baseline_cell_id"] != ""
    assert by_metric(frame, f"{COLD_WARM_DELTA}_verdict")["note"] == DIFFERS
    assert "Welch" in by_metric(frame, f"{COLD_WARM_DELTA}_low")["formula"]
    decode = answer_block(frame).cells[1]
    assert decode["texts"][2] == "30.0 [29.0-31.0] (3)"  # the cold processes


def test_a_prefill_a_table_strikes_is_struck_in_the_answer_and_left_out_of_the_sentence():
    cached = [series(WARM, [{"decode_tok_s": 30.0 + r}, *({"decode_tok_s": 50.0, "engine_cached_tokens": 60}
                                                         for _ in range(3))], repeat=r)
              for r in (1, 2, 3)]  # fmt: skip
    frame = figure_frame(*cached)
    block = answer_block(frame)
    prefill, decode = block.cells
    assert prefill["texts"][4].startswith(f"{STRUCK} (cache hit") and prefill["texts"][5].startswith(
        "cache hit"
    )
    assert prefill["texts"][6].startswith(STRUCK)  # TTFT beside it: the same shots, struck too
    assert decode["texts"][5] == DIFFERS
    assert f"prefill: {STRUCK} (cache hit" in block.sentence and "decode " in block.sentence


BUSY = {"host_foreign_cores": 64.0}  # far above any host_busy threshold


def test_busy_shots_give_no_second_row_picked_after_seeing_them():
    slow = {"decode_tok_s": 20.0, **BUSY}
    busy_series = series(WARM, [*speeds(30.0, 50.0), slow, slow, *speeds(50.5)])
    frame = figure_frame(busy_series, *PAIRED[1:])
    assert not [m for m in frame["metric"] if m.endswith("_quiet")]
    assert "host_busy" in by_metric(frame, COLD_WARM_DELTA)["caveat_ids"]
    assert len(answer_block(frame).cells) == 2


# --- the best mode: one gate rule with the tables ------------------------------------------------


def recall(mode: str) -> dict:
    return cell(workload="verbatim_recall", prompt_tokens_requested=384, spec_mode=mode)


def mode_series(
    mode: str, speed: float, task_done: bool | None, lossless: bool | None, repeat=1
) -> list[dict]:
    diverged = None if lossless is not False else 3
    values = {"task_gate": "recall", "task_done": task_done, "recall_exact": task_done,
              "lossless_vs_none": lossless, "first_divergence_token": diverged}  # fmt: skip
    return series(
        recall(mode), [{**values, "decode_tok_s": speed + i + repeat / 10} for i in range(3)], repeat=repeat
    )


def two_processes(mode: str, speed: float, task_done: bool | None, lossless: bool | None) -> list[list[dict]]:
    return [mode_series(mode, speed, task_done, lossless, repeat) for repeat in (1, 2)]


def struck_ids(frame: pd.DataFrame) -> set[str]:
    """The figures any report table strikes."""
    cells = [cell for t in lay_out(build_tables(frame), {}) for row in t.rows for cell in row.cells]
    parts = [part for cell in cells if cell.struck for line in cell.lines for part in line]
    return {part.figure_id for part in parts if part.kind}


def test_a_gated_mode_is_never_the_best_mode_and_no_answer_row_names_a_struck_figure():
    frame = figure_frame(
        *two_processes("none", 50.0, True, None),
        *two_processes("ngram_fast", 200.0, False, True),  # fastest, but the task gate failed
        *two_processes("draft_lossy", 150.0, True, False),  # lossy
        *two_processes("unchecked", 180.0, None, True),  # its task gate could not be checked
        *two_processes("ngram_mod", 70.0, True, True),  # the only mode that passed everything
    )
    best = by_metric(frame, BEST_MODE)
    assert best["spec_mode"] == "ngram_mod"
    counted = by_metric(frame, MODES_PASSING)
    assert counted["value"] == 1 and "ngram_fast (gate failed)" in counted["note"]
    assert "draft_lossy (lossy)" in counted["note"] and "unchecked (gate not checked)" in counted["note"]
    (row,) = answer_block(frame).workloads
    assert row["best_mode"] == "ngram_mod" and row["texts"][5] == "passed (4/4 shots)"
    # each process's warm shots 2-3: 71.6 and 71.7 against 51.6 and 51.7
    assert row["texts"][3] == "×1.39 [×1.38, ×1.40]" and row["texts"][4] == DIFFERS
    struck = struck_ids(frame)
    assert len(struck) == 3 and not struck & set(row["ids"])


def test_a_gate_failed_on_a_shot_the_figure_does_not_use_still_keeps_the_mode_out():
    # The case the issue found: the no-draft cell failed its gate on shot 1 (not a warm shot), the
    # table struck the speed-up, and the answer named the mode best anyway.
    none = [mode_series("none", 50.0, True, None, repeat) for repeat in (1, 2)]
    none[0][0]["task_done"] = False  # shot 1 of the first no-draft process
    frame = figure_frame(*none, *two_processes("ngram", 120.0, True, True))
    assert BEST_MODE not in set(frame["metric"])
    (row,) = answer_block(frame).workloads
    assert row["best_mode"] == "no mode passed"
    assert struck_ids(frame) and not struck_ids(frame) & set(row["ids"])


def test_the_answer_opens_the_summary_and_the_html_block_holds_its_rows():
    figures, caveats = compute_figures(table(*PAIRED), [], 0.7)
    frame = pd.DataFrame([f.as_row() for f in figures])
    summary = render_summary(
        frame, pd.DataFrame(caveats, columns=["caveat_id", "sentence", "figure_ids"]), "t"
    )
    assert summary.index("## Answer") < summary.index("## Cold and warm")
    html = ENV.get_template("answer_block.html.j2").render(answer=answer_block(frame))
    assert "% slower [" in html and "30.0 [29.0-31.0] (3)" in html
    page = (Path(whichshot.report.__file__).parent / "templates" / "index.html.j2").read_text()
    title = page.index("<h1>")
    assert page.index('{% include "answer_block.html.j2" %}', title) == page.index("</h1>", title) + 6
