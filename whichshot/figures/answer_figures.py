"""The answer block's figures. Per warm cell and its cold sibling: the cold-vs-warm decode delta,
its bootstrap interval and noise verdict (figures.noise), and each side's lowest and highest shot
beside its median. Per drafted workload cell: its speed-up's interval and verdict. Per workload:
how many modes passed their task gate (and the no-draft cell its own) and are lossless, and the
best speed-up among only those."""

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.cell_figures import AGGREGATION
from whichshot.figures.cells import Cell, cell_id, cold_sibling, group_cells
from whichshot.figures.noise import METHOD, verdict_words
from whichshot.figures.statistic import Selection
from whichshot.figures.workload_figures import SPEEDUP_METRIC
from whichshot.measure.grid import BASE_WORKLOAD, NO_DRAFT

SPEED = "decode_tok_s"
COLD_WARM_DELTA = "decode_tok_s_cold_vs_warm_delta"
LOWEST, HIGHEST = "decode_tok_s_lowest", "decode_tok_s_highest"
BEST_MODE = "best_mode_speedup_vs_none"
MODES_PASSING = "modes_gate_passed_lossless"
TASK_SHARE, LOSSLESS_SHARE = "task_done_share", "lossless_share"
VERDICT_UNIT = "verdict"  # 1 = beyond noise, 0 = within noise, no value = too few shots to tell


def interval_metrics(metric: str) -> tuple[str, str, str]:
    """The metrics of a comparison's interval ends and noise verdict."""
    return f"{metric}_low", f"{metric}_high", f"{metric}_verdict"


ANSWER_METRICS = frozenset({COLD_WARM_DELTA, *interval_metrics(COLD_WARM_DELTA), LOWEST, HIGHEST,
                            *interval_metrics(SPEEDUP_METRIC), BEST_MODE, MODES_PASSING})  # fmt: skip


def answer_figures(catalog: Catalog) -> list[figure.Figure]:
    cells = {cell_id(cell): (cell, rows) for cell, rows in group_cells(catalog.shots)}
    figures: list[figure.Figure] = []
    spread_done: set[str] = set()
    for cell, rows in cells.values():
        cold = cold_sibling(cell)
        if cell["protocol"] != "warm" or cell_id(cold) not in cells:
            continue
        figures += _cold_vs_warm(catalog, cell, rows, cold, cells[cell_id(cold)][1])
        for side, side_rows in ((cell, rows), (cold, cells[cell_id(cold)][1])):
            if cell_id(side) not in spread_done:
                spread_done.add(cell_id(side))
                figures += _spread(catalog, side, side_rows)
    for cell, rows in cells.values():
        base = {**cell, "spec_mode": NO_DRAFT}
        if cell["workload"] != BASE_WORKLOAD and cell["spec_mode"] != NO_DRAFT and cell_id(base) in cells:
            figures += _speedup_interval(catalog, cell, rows, base, cells[cell_id(base)][1])
    figures += _best_modes(catalog, cells)
    return figures


def _cold_vs_warm(catalog: Catalog, warm: Cell, rows, cold: Cell, cold_rows) -> list[figure.Figure]:
    cold_speed, warm_speed = catalog.find(cold, SPEED), catalog.find(warm, SPEED)
    if cold_speed is None or warm_speed is None:
        return []
    delta = figure.from_figures(
        COLD_WARM_DELTA,
        [cold_speed, warm_speed],
        "relative_gap",
        unit="fraction",
        cell=warm,
        baseline=cold,
        formula=f"cold {SPEED} / warm {SPEED} - 1: below 0 the first shot decodes slower than the warm ones",
        computed_by=answer_figures,
    )
    selections = (catalog.rule("cold").select(cold_rows, SPEED), catalog.rule("warm").select(rows, SPEED))
    words = f"the interval of cold / warm {SPEED} - 1"
    sides = (cold, warm)
    return [
        delta,
        *_interval(COLD_WARM_DELTA, warm, cold, sides, selections, "protocol", words, less_one=True),
    ]


def _speedup_interval(catalog: Catalog, cell: Cell, rows, base: Cell, base_rows) -> list[figure.Figure]:
    if catalog.find(cell, SPEEDUP_METRIC) is None:
        return []
    rule = catalog.rule(cell["protocol"])
    selections = (rule.select(rows, SPEED), rule.select(base_rows, SPEED))
    words = f"the interval of {SPEED} with {cell['spec_mode']} / without drafting"
    return _interval(SPEEDUP_METRIC, cell, base, (cell, base), selections, "spec_mode", words, less_one=False)


def _interval(
    metric: str,
    cell: Cell,
    baseline: Cell,
    sides: tuple[Cell, Cell],
    selections: tuple[Selection, Selection],
    side_axis: str,
    words: str,
    less_one: bool,
) -> list[figure.Figure]:
    """The interval ends of side / reference (bootstrap over both sides' selected shots, in `sides`
    and `selections` order) and its verdict; the figures are about `cell`, compared with `baseline`."""
    side, reference = selections
    both = Selection(
        pd.concat([side.rows, reference.rows]),
        pd.concat([side.examined, reference.examined]),
        f"{side.label} against {reference.label}",
        f"{side.shot_indices} against {reference.shot_indices}",
    )
    side_value, reference_value = sides[0][side_axis], sides[1][side_axis]
    parameters = {
        "side_axis": side_axis,
        "side": side_value,
        "reference": reference_value,
        "statistics": {side_value: _statistic(sides[0]), reference_value: _statistic(sides[1])},
        "less_one": less_one,
    }
    low_metric, high_metric, verdict_metric = interval_metrics(metric)
    ends = [
        figure.from_shots(
            end_metric,
            cell,
            both,
            aggregation,
            [SPEED],
            unit="fraction" if less_one else "ratio",
            parameters=parameters,
            baseline=baseline,
            formula=f"{end} end of {words}: {METHOD}",
            computed_by=answer_figures,
        )
        for end_metric, aggregation, end in (
            (low_metric, "bootstrap_low", "low"),
            (high_metric, "bootstrap_high", "high"),
        )  # fmt: skip
    ]
    null = 0.0 if less_one else 1.0
    verdict = figure.from_figures(
        verdict_metric,
        ends,
        "noise_verdict",
        unit=VERDICT_UNIT,
        cell=cell,
        baseline=baseline,
        parameters={"null": null},
        formula=f"1 = beyond noise ({words} leaves out {null:g}), 0 = within noise (it holds {null:g}), no "
        f"value = too few shots to tell; {METHOD}",
        computed_by=answer_figures,
    )
    verdict.note = verdict_words(verdict.value)
    return [*ends, verdict]


def _statistic(cell: Cell) -> str:
    """The aggregation the cell's own decode figure uses (cell_figures.AGGREGATION)."""
    return AGGREGATION[cell["protocol"]]


def _spread(catalog: Catalog, cell: Cell, rows) -> list[figure.Figure]:
    """The cell's lowest and highest decode shot among those its statistic uses."""
    selection = catalog.rule(cell["protocol"]).select(rows, SPEED)
    if selection.rows.empty:
        return []
    return [
        figure.from_shots(
            metric,
            cell,
            selection,
            aggregation,
            [SPEED],
            formula=f"{words} {SPEED} of the shots the {cell['protocol']} figure uses",
            computed_by=answer_figures,
        )
        for metric, aggregation, words in ((LOWEST, "minimum", "lowest"), (HIGHEST, "maximum", "highest"))
    ]


def _best_modes(catalog: Catalog, cells: dict[str, tuple[Cell, pd.DataFrame]]) -> list[figure.Figure]:
    """Per workload's no-draft cell: the count of modes that passed every gate, and the best of them."""
    modes_of: dict[str, list[Cell]] = {}
    for cell, _rows in cells.values():
        base = {**cell, "spec_mode": NO_DRAFT}
        if cell["spec_mode"] != NO_DRAFT and catalog.find(cell, SPEEDUP_METRIC) is not None:
            modes_of.setdefault(cell_id(base), []).append(cell)
    figures = []
    for base_id, modes in modes_of.items():
        figures += _best_mode(catalog, cells[base_id][0], modes)
    return figures


def _best_mode(catalog: Catalog, base: Cell, modes: list[Cell]) -> list[figure.Figure]:
    base_gate = catalog.find(base, TASK_SHARE)
    checks, passing, left_out = [], [], []
    for mode in modes:
        gate, lossless = catalog.find(mode, TASK_SHARE), catalog.find(mode, LOSSLESS_SHARE)
        if gate is not None and base_gate is not None and lossless is not None:
            checks += [gate, base_gate, lossless]
        why = _left_out_because(gate, base_gate, lossless)
        if why:
            left_out.append(f"{mode['spec_mode']} ({why})")
        else:
            passing.append((mode, catalog.find(mode, SPEEDUP_METRIC)))
    note = "left out: " + "; ".join(left_out) if left_out else "every mode passed"
    figures = []
    if checks:
        figures.append(
            figure.from_figures(
                MODES_PASSING,
                checks,
                "count_groups_passing",
                unit="modes",
                cell=base,
                parameters={"group": 3, "modes": len(modes)},
                formula=f"modes (of {len(modes)}) whose every shot passed the task gate, whose no-draft "
                "cell's every shot passed it too, and whose every output equals the no-draft one (lossless)",
                computed_by=answer_figures,
                note=note,
            )
        )
    valued = [(mode, speedup) for mode, speedup in passing if speedup.value is not None]
    if valued:
        best_mode, _best = max(valued, key=lambda pair: pair[1].value)
        figures.append(
            figure.from_figures(
                BEST_MODE,
                [speedup for _mode, speedup in valued],
                "highest_input",
                unit="ratio",
                cell=best_mode,
                baseline=base,
                formula=f"the highest {SPEEDUP_METRIC} among the modes whose task gate passed (every shot, "
                "and the no-draft cell's) and that are lossless; the figure's cell is that mode's",
                computed_by=answer_figures,
                note=f"best of {len(valued)} mode(s) that passed; {note}",
            )
        )
    return figures


def _left_out_because(gate, base_gate, lossless) -> str:
    """Why a mode cannot be the best mode ('' when it can)."""
    for share, failed, unchecked in (
        (gate, "task gate failed", "task gate not checked"),
        (base_gate, "no-draft cell's task gate failed", "no-draft cell's task gate not checked"),
        (lossless, "lossy", "lossless not checked"),
    ):
        if share is None or share.value is None:
            return unchecked
        if share.value != 1:
            return failed
    return ""
