"""Seed 002's workload figures, per workload cell: speed-up over the same cell without drafting,
acceptance and accepted tokens per step (engine counts and server counters), and the shares of
shots that passed each check (the task gate, loops, lossless against no drafting, needle, edit,
recall, code)."""

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import Cell, group_cells, shots_in
from whichshot.figures.comparison import Pair, comparison_figures
from whichshot.shots.axes import BASE_WORKLOAD, NO_DRAFT
from whichshot.shots.divergence import NEAR_TIE, OUTCOME_WORDS, outcome_text

# (figure, numerator column, denominator column, words): ratios of summed counts over the shots used
COUNT_RATIOS = (
    (
        "acceptance_rate",
        "engine_draft_accepted",
        "engine_draft_tokens",
        "summed engine-reported draft_n_accepted / summed draft_n",
    ),
    (
        "server_acceptance_rate",
        "server_spec_accepted_tokens_delta",
        "server_spec_draft_tokens_delta",
        "summed /metrics accepted-token deltas / summed draft-token deltas",
    ),
    (
        "server_accepted_per_step",
        "server_spec_accepted_tokens_delta",
        "server_spec_drafts_delta",
        "summed /metrics accepted-token deltas / summed verification-step (drafts) deltas",
    ),
)
# (figure, boolean shot column, what a true value means)
SHARES = (
    ("task_done_share", "task_done", "output passed its workload's task gate (task_gate)"),
    ("loop_share", "loop_detected", "output ends in a degenerate loop"),
    ("lossless_share", "lossless_vs_none", "output tokens equal the no-draft shot's at the same position"),
    ("needle_found_share", "needle_found", "the output holds the planted passphrase"),
    ("edit_made_share", "edit_made", "the returned file has the asked rename"),
    ("edit_intact_share", "edit_intact", "returned file is otherwise unchanged"),
    ("recall_exact_share", "recall_exact", "the document came back verbatim (whitespace-normalised)"),
    ("code_parses_share", "code_parses", "code parses as Python 3"),
)
SPEEDUP_METRIC = "speedup_vs_none"
# The speed-up over the text a drafted shot shares with its no-draft counterpart (issue 50).
SHARED_PREFIX, SHARED_PREFIX_METRIC = "shared_prefix_speedup", "shared_prefix_speedup_vs_none"
SPEED = "decode_tok_s"
# Accepted over drafted tokens: 0 % where the engine counted and drafted nothing, so that a mode that
# drafted nothing reads as such (its speed-up then is no drafter's work), not as "does not apply".
ACCEPTANCE_RATES = ("acceptance_rate", "server_acceptance_rate")
# (accepted, drafted) columns of each acceptance rate, the engine's own counts first.
ACCEPTANCE_COUNTS = tuple((n, d) for metric, n, d, _ in COUNT_RATIOS if metric in ACCEPTANCE_RATES)


def workload_figures(catalog: Catalog) -> list[figure.Figure]:
    figures = []
    for cell, rows in group_cells(catalog.shots):
        if cell["workload"] == BASE_WORKLOAD:
            continue
        figures += _speedup(catalog, cell, rows)
        if cell["spec_mode"] != NO_DRAFT:
            figures += _count_ratios(catalog, cell, rows)
            figures += _shared_prefix_speedup(catalog, cell, rows)
        figures += _shares(catalog, cell, rows)
    return figures


def _speedup(catalog: Catalog, cell: Cell, rows: pd.DataFrame) -> list[figure.Figure]:
    """The drafted cell's decode speed over the no-draft cell's, processes as the unit, with its
    interval and verdict (figures.comparison)."""
    base = {**cell, "spec_mode": NO_DRAFT}
    base_rows = shots_in(catalog.shots, base)
    if cell["spec_mode"] == NO_DRAFT or base_rows.empty:
        return []
    rule = catalog.rule(cell["protocol"])
    selections = (rule.select(rows, SPEED), rule.select(base_rows, SPEED))
    return comparison_figures(speedup_pair(cell), selections, catalog.verdict_margin, workload_figures)


def speedup_pair(cell: Cell, metric: str = SPEEDUP_METRIC) -> Pair:
    """What a drafted cell's speed-up compares: its decode speed over the same cell's without drafting."""
    base = {**cell, "spec_mode": NO_DRAFT}
    words = (
        f"{SPEED} with {cell['spec_mode']} / without drafting (same cell otherwise, {cell['protocol']} rule)"
    )
    return Pair(metric, SPEED, cell, base, "spec_mode", False, cell, base, words)


def _count_ratios(catalog: Catalog, cell: Cell, rows: pd.DataFrame) -> list[figure.Figure]:
    figures = []
    for metric, numerator, denominator, words in COUNT_RATIOS:
        selection = catalog.rule(cell["protocol"]).select(rows, denominator)
        drafted_nothing = selection.rows[denominator].fillna(0).sum() <= 0
        if drafted_nothing and (metric not in ACCEPTANCE_RATES or selection.rows.empty):
            continue
        figures.append(
            figure.from_shots(
                metric,
                cell,
                selection,
                "ratio_of_sums",
                [numerator, denominator],
                unit="tokens/step" if metric.endswith("per_step") else "fraction",
                parameters={"both_zero": 0.0} if metric in ACCEPTANCE_RATES else None,
                formula=f"{words} over the shots of the {cell['protocol']} rule"
                + ("; 0 where the engine counted no draft" if metric in ACCEPTANCE_RATES else ""),
                note="drafted nothing (0 draft tokens counted)" if drafted_nothing else "",
                computed_by=workload_figures,
            )
        )
    return figures


def _shares(catalog: Catalog, cell: Cell, rows: pd.DataFrame) -> list[figure.Figure]:
    figures = []
    for metric, column, meaning in SHARES:
        if rows[column].isna().all():
            continue
        selection = catalog.rule(cell["protocol"]).select(rows, column)
        note = _divergence_note(selection.rows) if column == "lossless_vs_none" else ""
        figures.append(
            figure.from_shots(
                metric,
                cell,
                selection,
                "share_true",
                [column],
                unit="fraction",
                note=note,
                formula=f"share of the {cell['protocol']} rule's shots whose {meaning}",
                computed_by=workload_figures,
            )
        )
    return figures


def _divergence_note(rows: pd.DataFrame) -> str:
    """The cell's outcome (shots.divergence): identical; identical up to near-ties; changed by drafting
    (or diverged, no margin measured), with the first divergence of the worst outcome and its shot."""
    diverged = rows[rows["lossless_vs_none"] == False]  # noqa: E712 -- None means not compared
    if diverged.empty:
        return "identical to the no-draft output"
    near_tie = diverged["divergence_outcome"] == NEAR_TIE
    worst = diverged[~near_tie] if (~near_tie).any() else diverged
    first = worst.sort_values("first_divergence_token").iloc[0]
    head = OUTCOME_WORDS[NEAR_TIE] + ": " if near_tie.all() else ""
    return f"{head}{outcome_text(first.to_dict())} in {first['shot_id']}"


def _shared_prefix_speedup(catalog: Catalog, cell: Cell, rows: pd.DataFrame) -> list[figure.Figure]:
    """Where the cell's outputs part from the no-draft ones: the median speed-up over the text both
    wrote (shots.shared_prefix), beside the whole-output speed-up."""
    selection = catalog.rule(cell["protocol"]).select(rows, SHARED_PREFIX)
    if selection.rows[SHARED_PREFIX].isna().all():
        return []
    timed = selection.rows[selection.rows[SHARED_PREFIX].notna()]
    shortest = int(timed["first_divergence_token"].min())
    return [
        figure.from_shots(
            SHARED_PREFIX_METRIC,
            cell,
            selection,
            "median",
            [SHARED_PREFIX],
            unit="ratio",
            formula="median over the drafted shots whose output parts from the no-draft one of the no-draft "
            "shot's decode time over the tokens before the first divergence / this shot's (token arrival "
            f"times, our clock; {cell['protocol']} rule)",
            note=f"over the shared prefix: {shortest} tokens or more",
            computed_by=workload_figures,
        )
    ]
