"""Caveats about whether the workload was done: a cell whose shots failed their task gate, and a
speed-up that comes from the model repeating itself rather than from copying its input."""

import pandas as pd

from whichshot.figures.catalog import Catalog
from whichshot.figures.caveats.finding import whole_cells
from whichshot.figures.cells import shots_in
from whichshot.figures.constants import SELF_REPETITION_DOMINANT
from whichshot.figures.workload_figures import SPEEDUP_METRIC
from whichshot.shots.caveat import Finding, flag_false

TASK_NOT_DONE = "task_not_done"
TASK_GATE_NOT_CHECKED = "task_gate_not_checked"


def task_not_done(catalog: Catalog) -> Finding | None:
    """Cells with an ok shot whose task gate failed: every figure of the cell, and every speed-up
    that compares with it, is not the task's speed."""
    shots = catalog.shots
    failed = (shots["status"] == "ok") & flag_false(shots["task_done"])
    if not failed.any():
        return None
    cells = shots[failed].groupby(["workload", "text_kind"])
    listed = "; ".join(f"{workload}/{kind} {len(rows)} shot(s)" for (workload, kind), rows in list(cells)[:6])
    return Finding(
        TASK_NOT_DONE,
        f"The model did not do the task in {int(failed.sum())} shot(s) ({listed}; each workload's gate is "
        "its task_gate): the speed of these cells is not the task's speed, and a speed-up against them is "
        "not the task's speed-up.",
        whole_cells(shots, failed),
    )


def task_gate_not_checked(catalog: Catalog) -> Finding | None:
    """Cells of a workload that has a task gate with an ok shot the gate could not check (a column
    it needs was not recorded): their speed is not known to be the task's, so a speed-up against
    them is gated out like a failed one."""
    shots = catalog.shots
    unchecked = (shots["status"] == "ok") & shots["task_gate"].notna() & shots["task_done"].isna()
    if not unchecked.any():
        return None
    cells = shots[unchecked].groupby(["workload", "text_kind"])
    listed = "; ".join(f"{workload}/{kind} {len(rows)} shot(s)" for (workload, kind), rows in list(cells)[:6])
    return Finding(
        TASK_GATE_NOT_CHECKED,
        f"The task gate could not be checked in {int(unchecked.sum())} shot(s) ({listed}): a column the "
        "gate needs was not recorded, so these cells' speed is not known to be the task's, and a "
        "speed-up against them is set apart like one whose gate failed.",
        whole_cells(shots, unchecked),
    )


def speedup_from_self_repetition(catalog: Catalog) -> Finding | None:
    """Drafted speed-ups whose output mostly repeats itself: the drafts copy the model's own loop."""
    shots = catalog.shots
    affected: set[str] = set()
    named = []
    for figure in catalog.figures:
        if figure.metric != SPEEDUP_METRIC or figure.value is None or figure.value <= 1:
            continue
        drafted = shots_in(shots, figure.axes)  # the drafted cell; the figure also cites its baseline
        rows = drafted[drafted["shot_id"].isin(figure.shot_ids)]
        repeated, copied = _median(rows["self_repetition"]), _median(rows["copy_fraction"])
        if repeated is None or repeated <= SELF_REPETITION_DOMINANT or repeated <= (copied or 0):
            continue
        affected.update(figure.shot_ids)
        named.append(f"{figure.cell_id} (self-repetition {repeated:.0%}, copy from input {copied or 0:.0%})")
    if not affected:
        return None
    return Finding(
        "speedup_from_self_repetition",
        f"{len(named)} drafted speed-up(s) come mostly from the output repeating itself, not from copying "
        f"the input: {'; '.join(named[:4])}. The drafts copy the model's own repetition; a model that "
        "does the task would not be sped up the same way.",
        frozenset(affected),
        columns=frozenset({"decode_tok_s", "engine_decode_tok_s"}),
    )


def _median(values: pd.Series) -> float | None:
    values = values.dropna()
    return float(values.astype(float).median()) if len(values) else None


TASK_RULES = (task_not_done, task_gate_not_checked, speedup_from_self_repetition)
