"""The answer block (issue 32): noise verdicts from a seeded bootstrap, the cold-vs-warm rows with
their spread, and per workload the best mode among those whose task gate passed and that are
lossless, built from figures computed from hand-made shots."""

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
    interval_metrics,
    quiet,
)
from whichshot.figures.noise import (
    BEYOND_NOISE,
    TOO_FEW,
    WITHIN_NOISE,
    bootstrap_ratio_interval,
    resampling_units,
)
from whichshot.figures.table import compute_figures
from whichshot.report.answer import QUIET_LABEL, TOO_FEW_QUIET, answer_block, answer_markdown
from whichshot.report.summary import render_summary
from whichshot.report.templating import ENV

WARM, COLD = cell(protocol="warm"), cell(protocol="cold")


def figure_frame(*parts) -> pd.DataFrame:
    figures, _caveats = compute_figures(table(*parts), [], 0.7)
    return pd.DataFrame([f.as_row() for f in figures])


def speeds(*values: float) -> list[dict]:
    return [{"decode_tok_s": v} for v in values]


def by_metric(frame: pd.DataFrame, metric: str) -> dict:
    rows = frame[frame["metric"] == metric]
    assert len(rows) == 1, (metric, len(rows))
    return rows.iloc[0].to_dict()


SEPARATED = (
    series(COLD, speeds(30.0, 31.0, 29.0, 30.5)),
    series(WARM, speeds(49.0, 50.0, 51.0, 50.0, 50.5)),
    series(WARM, speeds(50.0, 49.5, 50.5, 50.0, 49.0), repeat=2),
)


def test_the_interval_holds_the_true_delta_of_clearly_separated_groups():
    frame = figure_frame(*SEPARATED)
    delta = by_metric(frame, COLD_WARM_DELTA)
    low, high = by_metric(frame, f"{COLD_WARM_DELTA}_low"), by_metric(frame, f"{COLD_WARM_DELTA}_high")
    verdict = by_metric(frame, f"{COLD_WARM_DELTA}_verdict")
    assert delta["value"] == 30.25 / 50.0 - 1
    assert low["value"] <= delta["value"] <= high["value"] < 0
    assert (verdict["value"], verdict["note"]) == (1.0, BEYOND_NOISE)
    assert "2000 resamples, seed 32" in low["formula"] and "seed 32" in verdict["formula"]
    assert low["kind"] == "derived" and set(low["shot_ids"]) == set(delta["shot_ids"])


def test_overlapping_groups_are_within_noise_and_one_cold_shot_is_too_few():
    overlapping = figure_frame(
        series(COLD, speeds(35.0, 62.0, 44.0, 58.0, 50.0)),
        series(WARM, speeds(40.0, 60.0, 45.0, 55.0, 52.0, 48.0, 38.0)),
    )
    verdict = by_metric(overlapping, f"{COLD_WARM_DELTA}_verdict")
    assert (verdict["value"], verdict["note"]) == (0.0, WITHIN_NOISE)
    single = figure_frame(series(COLD, speeds(30.0)), series(WARM, speeds(50.0, 51.0, 49.0, 50.0)))
    low, verdict = (
        by_metric(single, f"{COLD_WARM_DELTA}_low"),
        by_metric(single, f"{COLD_WARM_DELTA}_verdict"),
    )
    assert pd.isna(low["value"]) and pd.isna(verdict["value"]) and verdict["note"] == TOO_FEW


def test_a_side_resamples_series_when_it_has_two_else_shots_and_the_draw_is_seeded():
    two = table(series(WARM, speeds(1.0, 2.0)), series(WARM, speeds(3.0, 4.0), repeat=2))
    assert resampling_units(two, "decode_tok_s") == ((1.0, 2.0), (3.0, 4.0))
    assert resampling_units(table(series(WARM, speeds(1.0, 2.0))), "decode_tok_s") == ((1.0,), (2.0,))
    units = ((1.0,), (2.0,), (3.0,))
    first = bootstrap_ratio_interval(units, units, "median", "median")
    assert first == bootstrap_ratio_interval(units, units, "median", "median", 32)
    assert bootstrap_ratio_interval(((1.0,),), units, "median", "median") is None


def test_the_answer_block_rows_and_sentence_for_a_known_table():
    block = answer_block(figure_frame(*SEPARATED))
    assert block.sentence == (
        "The first (cold) shot decodes 39.5 % slower than the warm shots here (eng · m · p64 · ctx 512): "
        "beyond noise."
    )
    (row,) = block.cells
    assert row["texts"][:3] == ["eng · m · p64 · ctx 512", "30.2 [29.0-31.0] (4)", "50.0 [49.0-51.0] (8)"]
    assert row["texts"][3].startswith("-39.5 % [-") and row["texts"][4] == BEYOND_NOISE
    assert row["texts"][5] == "—"  # no llama-bench run
    markdown = "\n".join(answer_markdown(block))
    assert markdown.startswith("## Answer\n\nThe first (cold) shot decodes 39.5 % slower")
    assert "| eng · m · p64 · ctx 512 | 30.2 \\[29.0-31.0\\] (4) |" in markdown


def recall(mode: str) -> dict:
    return cell(workload="verbatim_recall", prompt_tokens_requested=384, spec_mode=mode)


def mode_series(mode: str, speed: float, task_done: bool, lossless: bool | None) -> list[dict]:
    values = {"task_done": task_done, "recall_exact": task_done, "lossless_vs_none": lossless,
              "first_divergence_token": None if lossless else 3}  # fmt: skip
    return series(recall(mode), [{**values, "decode_tok_s": speed + i} for i in range(4)])


def test_a_failed_gate_or_lossy_mode_is_never_the_best_mode():
    frame = figure_frame(
        mode_series("none", 50.0, True, None),
        mode_series("ngram_fast", 200.0, False, True),  # fastest, but the task gate failed
        mode_series("draft_lossy", 150.0, True, False),  # lossy
        mode_series("ngram_mod", 70.0, True, True),  # the only mode that passed everything
    )
    best = by_metric(frame, BEST_MODE)
    assert (
        best["spec_mode"] == "ngram_mod" and best["value"] == 72.0 / 52.0
    )  # the warm rule's shots 2-4: speed + 2
    counted = by_metric(frame, MODES_PASSING)
    assert counted["value"] == 1
    assert "ngram_fast (task gate failed)" in counted["note"] and "draft_lossy (lossy)" in counted["note"]
    (row,) = answer_block(frame).workloads
    assert row["best_mode"] == "ngram_mod"
    assert row["texts"][2:5] == ["ngram_mod", row["texts"][3], "passed (3/3 shots)"]
    assert row["texts"][3].startswith("×1.38 [×") and "ngram_fast" not in row["texts"][3]
    assert row["texts"][6].startswith("1 of 3; left out:")


def test_no_mode_passing_gives_no_best_mode():
    frame = figure_frame(mode_series("none", 50.0, True, None), mode_series("ngram", 200.0, False, True))
    assert BEST_MODE not in set(frame["metric"])
    (row,) = answer_block(frame).workloads
    assert row["best_mode"] == "no mode passed" and row["texts"][6].startswith("0 of 1")


def test_the_answer_opens_the_summary_and_the_html_block_holds_its_rows():
    figures, caveats = compute_figures(table(*SEPARATED), [], 0.7)
    frame = pd.DataFrame([f.as_row() for f in figures])
    summary = render_summary(
        frame, pd.DataFrame(caveats, columns=["caveat_id", "sentence", "figure_ids"]), "t"
    )
    assert summary.index("## Answer") < summary.index("## Cold and warm")
    html = ENV.get_template("answer_block.html.j2").render(answer=answer_block(frame))
    assert "decodes 39.5 % slower than the warm shots here" in html and "30.2 [29.0-31.0] (4)" in html
    page = (Path(whichshot.report.__file__).parent / "templates" / "index.html.j2").read_text()
    title = page.index("<h1>")
    assert page.index('{% include "answer_block.html.j2" %}', title) == page.index("</h1>", title) + 6


# --- with and without host-busy shots, side by side ----------------------------------------------

BUSY = {"host_foreign_cores": 64.0}  # far above any host_busy threshold


def test_without_busy_shots_nothing_extra_appears():
    frame = figure_frame(*SEPARATED)
    assert not {m for m in frame["metric"] if m.endswith(QUIET)}
    block = answer_block(frame)
    assert block.cells[0]["quiet"] is None and block.busy_note == ""
    assert QUIET_LABEL not in "\n".join(answer_markdown(block))


def test_busy_warm_shots_give_the_row_again_without_them():
    slow = {"decode_tok_s": 20.0, **BUSY}
    busy_series = series(WARM, [*speeds(49.0, 50.0), slow, slow, *speeds(50.5)])
    frame = figure_frame(SEPARATED[0], busy_series, SEPARATED[2])
    delta, calm = by_metric(frame, COLD_WARM_DELTA), by_metric(frame, quiet(COLD_WARM_DELTA))
    busy_ids = {r["shot_id"] for r in busy_series if r.get("host_foreign_cores") == 64.0}
    assert "host_busy" in delta["caveat_ids"] and "host_busy" not in calm["caveat_ids"]
    assert delta["value"] == 30.25 / 42.375 - 1  # series medians 35 and 49.75
    assert calm["value"] == 30.25 / 50.0 - 1  # series medians 50.25 and 49.75
    assert set(calm["shot_ids"]) == set(delta["shot_ids"]) - busy_ids and len(calm["shot_ids"]) == 10
    assert by_metric(frame, quiet(SPEED))["protocol"] == "warm"  # the cold side had no busy shot
    assert by_metric(frame, interval_metrics(quiet(COLD_WARM_DELTA))[2])["note"] == BEYOND_NOISE
    block = answer_block(frame)
    (row,) = block.cells
    assert row["quiet"]["texts"][:3] == [QUIET_LABEL, "30.2 [29.0-31.0] (4)", "50.0 [49.0-50.5] (6)"]
    assert row["quiet"]["texts"][3].startswith("-39.5 % [-") and row["quiet"]["texts"][4] == BEYOND_NOISE
    assert block.busy_note and calm["figure_id"] in row["quiet"]["ids"]
    lines = answer_markdown(block)
    assert lines[lines.index(next(x for x in lines if x.startswith("| eng · m"))) + 1].startswith(
        f"| {QUIET_LABEL} | 30.2"
    )
    html = ENV.get_template("answer_block.html.j2").render(answer=block)
    assert html.count('<tr class="quiet"') == 1 and "50.0 [49.0-50.5] (6)" in html


def test_a_side_left_without_quiet_shots_says_so():
    frame = figure_frame(series(COLD, speeds(30.0, 31.0), **BUSY), *SEPARATED[1:])
    assert quiet(COLD_WARM_DELTA) not in set(frame["metric"]) and quiet(SPEED) not in set(frame["metric"])
    (row,) = answer_block(frame).cells
    assert row["quiet"]["texts"][1] == TOO_FEW_QUIET and row["quiet"]["texts"][3] == TOO_FEW_QUIET
    assert row["quiet"]["texts"][2] == row["texts"][2]  # the warm side had no busy shot: its own figures


def test_the_best_mode_without_busy_shots_is_chosen_again():
    gate = {"task_done": True, "recall_exact": True, "lossless_vs_none": True, "first_divergence_token": None}
    frame = figure_frame(
        mode_series("none", 50.0, True, None),
        series(recall("ngram_fast"), [{**gate, "decode_tok_s": 200.0 + i} for i in range(4)], **BUSY),
        mode_series("ngram_mod", 70.0, True, True),
    )
    assert by_metric(frame, BEST_MODE)["spec_mode"] == "ngram_fast"
    calm = by_metric(frame, quiet(BEST_MODE))
    assert calm["spec_mode"] == "ngram_mod" and calm["value"] == 72.0 / 52.0
    assert "too few quiet shots: ngram_fast" in calm["note"]
    assert not set(table(series(recall("ngram_fast"), [{}] * 4))["shot_id"]) & set(calm["shot_ids"])
    (row,) = answer_block(frame).workloads
    assert row["best_mode"] == "ngram_fast"
    assert row["quiet"]["texts"][:3] == [QUIET_LABEL, "52.0 tok/s", "ngram_mod"]
    assert row["quiet"]["texts"][3].startswith("×1.38 [×")
