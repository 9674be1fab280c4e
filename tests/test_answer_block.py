"""The answer block (issues 32 and 41): every phase of each cold/warm pair with its verdict, processes
as the unit; the sentence names the phase that moved; per workload the best mode among those no gate
strikes, by the same rule the tables strike by; rows without the host-busy shots from the same
functions with a rule less those shots. Built from figures computed from hand-made shots."""

from pathlib import Path

import pandas as pd

import whichshot.report
from tests.shot_tables import cell, series, table
from whichshot.figures.answer_figures import (
    BEST_MODE,
    COLD_WARM_DELTA,
    MODES_PASSING,
    QUIET,
    SPEED,
    cold_vs_warm,
    quiet,
)
from whichshot.figures.comparison import interval_metrics, range_metrics
from whichshot.figures.table import compute_figures
from whichshot.figures.verdict import DIFFERS, TOO_FEW, UNDECIDED
from whichshot.report.answer import QUIET_LABEL, TOO_FEW_QUIET, answer_block, answer_markdown
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


# Three cold processes at about 30 tok/s against three warm series (processes) at about 50.
SEPARATED = (
    series(COLD, speeds(30.0, 31.0, 29.0)),
    series(WARM, speeds(49.0, 50.0, 51.0, 50.0, 50.5)),
    series(WARM, speeds(50.0, 49.5, 50.5, 50.0, 49.0), repeat=2),
    series(WARM, speeds(51.0, 50.5, 50.0, 49.5, 50.5), repeat=3),
)


def test_every_phase_gets_its_verdict_and_the_sentence_names_the_one_that_moved():
    frame = figure_frame(*SEPARATED)
    delta = by_metric(frame, COLD_WARM_DELTA)
    low, high, verdict = (by_metric(frame, m) for m in interval_metrics(COLD_WARM_DELTA))
    assert low["value"] <= delta["value"] <= high["value"] < -0.02 and verdict["note"] == DIFFERS
    assert low["kind"] == "derived" and set(low["shot_ids"]) == set(delta["shot_ids"])
    for phase in ("ttft_s", "prefill_tok_s"):  # every shot the same: the interval is the point, 0
        assert by_metric(frame, f"{cold_vs_warm(phase)}_verdict")["note"] == SAME
    block = answer_block(frame)
    assert block.sentence == (
        "Here the first (cold) shot's decode is 40.1 % slower than the warm shots'; TTFT is the same "
        "within ±2 %; prefill is the same within ±2 %."
    )
    assert [row["texts"][1] for row in block.cells] == ["TTFT", "prefill", "decode"]
    decode = block.cells[2]
    # warm processes: the medians of shots 2-5, 50.25, 49.75 and 50.25
    assert decode["texts"][2:4] == ["30.0 [29.0-31.0] (3)", "50.2 [49.8-50.2] (3)"]
    assert decode["texts"][4].startswith("-40.1 % [-") and decode["texts"][5] == DIFFERS
    assert decode["texts"][6] == "—"  # no llama-bench run
    markdown = "\n".join(answer_markdown(block))
    assert markdown.startswith("## Answer\n\nHere the first (cold) shot's decode is 40.1 % slower")
    assert "| eng · m · p64 · ctx 512 | decode | 30.0 \\[29.0-31.0\\] (3) |" in markdown
    assert "Verdicts (margin ±2 %): each fresh process gives one value" in markdown


def test_a_run_where_prefill_moves_and_decode_does_not_says_so():
    # seed 000's question on a GPU: the first shot's prefill is slower (one-time work), decode is not
    first_shots = ((17_990.0, 51.0), (18_020.0, 50.9), (17_960.0, 51.1))
    cold = series(COLD, [{"prefill_tok_s": v, "decode_tok_s": d} for v, d in first_shots])

    def warm(r: int) -> list[dict]:
        prefill = (18_000.0, *[21_070.0 + r] * 4)  # its own shot 1 is a first shot too
        return series(
            WARM, [{"prefill_tok_s": v, "decode_tok_s": 51.0 + r * 0.05} for v in prefill], repeat=r
        )

    warms = [warm(r) for r in (1, 2, 3)]
    block = answer_block(figure_frame(cold, *warms))
    assert block.sentence.startswith(
        "Here the first (cold) shot's prefill is 14.6 % slower than the warm shots'"
    )
    assert "decode is the same within ±2 %" in block.sentence
    prefill = next(row for row in block.cells if row["phase"] == "prefill_tok_s")
    assert prefill["texts"][5] == DIFFERS


def test_one_warm_process_is_too_few_processes_and_the_range_is_shown():
    frame = figure_frame(series(COLD, speeds(30.0, 31.0, 29.0)), SEPARATED[1])
    verdict = by_metric(frame, f"{COLD_WARM_DELTA}_verdict")
    assert pd.isna(verdict["value"]) and verdict["note"] == TOO_FEW
    span_low, span_high = (by_metric(frame, m)["value"] for m in range_metrics(COLD_WARM_DELTA))
    assert (span_low, span_high) == (29.0 / 50.25 - 1, 31.0 / 50.25 - 1)  # the series' shots 2-5: 50.25
    decode = answer_block(frame).cells[2]
    assert (
        decode["texts"][4] == "-40.3 % (processes span -42.3 % to -38.3 %)" and decode["texts"][5] == TOO_FEW
    )


def test_noisy_processes_are_undecided():
    cold = series(COLD, speeds(30.0, 45.0, 60.0))
    frame = figure_frame(cold, *SEPARATED[1:])
    assert by_metric(frame, f"{COLD_WARM_DELTA}_verdict")["note"] == UNDECIDED


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
    figures, caveats = compute_figures(table(*SEPARATED), [], 0.7)
    frame = pd.DataFrame([f.as_row() for f in figures])
    summary = render_summary(
        frame, pd.DataFrame(caveats, columns=["caveat_id", "sentence", "figure_ids"]), "t"
    )
    assert summary.index("## Answer") < summary.index("## Cold and warm")
    html = ENV.get_template("answer_block.html.j2").render(answer=answer_block(frame))
    assert "decode is 40.1 % slower than the warm shots" in html and "30.0 [29.0-31.0] (3)" in html
    page = (Path(whichshot.report.__file__).parent / "templates" / "index.html.j2").read_text()
    title = page.index("<h1>")
    assert page.index('{% include "answer_block.html.j2" %}', title) == page.index("</h1>", title) + 6


# --- with and without host-busy shots, side by side ----------------------------------------------

BUSY = {"host_foreign_cores": 64.0}  # far above any host_busy threshold


def test_without_busy_shots_nothing_extra_appears():
    frame = figure_frame(*SEPARATED)
    assert not {m for m in frame["metric"] if QUIET in m}
    block = answer_block(frame)
    assert all(row["quiet"] is None for row in block.cells) and block.busy_note == ""


def test_busy_warm_shots_give_the_row_again_without_them():
    slow = {"decode_tok_s": 20.0, **BUSY}
    busy_series = series(WARM, [*speeds(49.0, 50.0), slow, slow, *speeds(50.5)])
    frame = figure_frame(SEPARATED[0], busy_series, *SEPARATED[2:])
    delta, calm = by_metric(frame, COLD_WARM_DELTA), by_metric(frame, quiet(COLD_WARM_DELTA))
    busy_ids = {r["shot_id"] for r in busy_series if r.get("host_foreign_cores") == 64.0}
    assert "host_busy" in delta["caveat_ids"] and "host_busy" not in calm["caveat_ids"]
    assert set(calm["shot_ids"]) == set(delta["shot_ids"]) - busy_ids
    assert calm["selected_by"] == "cold less host-busy and warm less host-busy"
    assert by_metric(frame, quiet(SPEED))["protocol"] == "warm"  # the cold side had no busy shot
    block = answer_block(frame)
    decode = block.cells[2]
    quiet_warm = "50.2 [49.8-50.2] (3)"  # the busy series keeps shots 2 and 5: 50.25, as before
    assert decode["quiet"]["texts"][:4] == [QUIET_LABEL, "decode", "30.0 [29.0-31.0] (3)", quiet_warm]
    assert decode["quiet"]["texts"][5] == DIFFERS and block.busy_note
    lines = answer_markdown(block)
    row = next(i for i, x in enumerate(lines) if x.startswith("| eng · m · p64 · ctx 512 | decode"))
    assert lines[row + 1].startswith(f"| {QUIET_LABEL} | decode | 30.0")
    html = ENV.get_template("answer_block.html.j2").render(answer=block)
    assert html.count('<tr class="quiet"') == 3  # the busy shots' TTFT and prefill are left out too
    assert block.sentence.startswith("Here the first (cold) shot differs from the warm shots in no phase")


def test_a_side_left_without_quiet_shots_says_so():
    frame = figure_frame(series(COLD, speeds(30.0, 31.0), **BUSY), *SEPARATED[1:])
    assert quiet(COLD_WARM_DELTA) not in set(frame["metric"])
    decode = answer_block(frame).cells[2]
    assert decode["quiet"]["texts"][2] == TOO_FEW_QUIET and decode["quiet"]["texts"][4] == TOO_FEW_QUIET
    assert decode["quiet"]["texts"][3] == decode["texts"][3]  # the warm side had no busy shot: its own


def test_the_best_mode_without_busy_shots_is_chosen_again():
    gate = {"task_gate": "recall", "task_done": True, "recall_exact": True, "lossless_vs_none": True}
    fast = [{**gate, "decode_tok_s": 200.0 + i} for i in range(3)]
    busy_fast = [series(recall("ngram_fast"), fast, repeat=r, **BUSY) for r in (1, 2)]
    frame = figure_frame(*two_processes("none", 50.0, True, None), *busy_fast,
                         *two_processes("ngram_mod", 70.0, True, True))  # fmt: skip
    assert by_metric(frame, BEST_MODE)["spec_mode"] == "ngram_fast"
    calm = by_metric(frame, quiet(BEST_MODE))
    assert calm["spec_mode"] == "ngram_mod" and "too few quiet shots: ngram_fast" in calm["note"]
    (row,) = answer_block(frame).workloads
    assert row["best_mode"] == "ngram_fast"
    assert row["quiet"]["texts"][:3] == [QUIET_LABEL, "51.7 tok/s", "ngram_mod"]
    assert row["quiet"]["texts"][3].startswith("×1.39 [×")
