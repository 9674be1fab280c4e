"""The answer block's figures. Per warm cell of the protocol grid (and of a workload whose config ran
cold processes), one verdict per quantity (prefill, decode): the first
shot against the warm shots with the process as the unit, its interval and verdict
(figures.comparison), and each side's lowest and highest process beside its median; TTFT beside
prefill as a number only (prefill = prompt tokens / TTFT in every shot: one measurement, one verdict).
Paired inside each process where the cell's warm series have a shot 1 (its process's cold shot);
else against the cold sibling's separate processes (unpaired). Per workload's no-draft cell: how many
speculative modes passed every gate (caveats.gates, the rule the tables strike by) and the best of
them."""

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.caveats.gates import GateCheck, gate_label
from whichshot.figures.cells import Cell, cell_id, cold_sibling, group_cells
from whichshot.figures.comparison import Pair, comparison_figures, comparison_metrics, comparison_point
from whichshot.figures.statistic import ColdRule, Selection, WarmRule
from whichshot.figures.steady_state import CLASSES
from whichshot.figures.steady_state import METHOD as STEADY_METHOD
from whichshot.figures.workload_figures import SPEEDUP_METRIC
from whichshot.shots.axes import BASE_WORKLOAD, NO_DRAFT

PHASES = ("prefill_tok_s", "decode_tok_s")  # one verdict each, in the answer's order
BESIDE = {"prefill_tok_s": "ttft_s"}  # shown beside a phase as a number, never a verdict of its own
SPEED = "decode_tok_s"
BEST_MODE = "best_mode_speedup_vs_none"
MODES_PASSING = "modes_gate_passed_lossless"
TASK_SHARE, LOSSLESS_SHARE = "task_done_share", "lossless_share"


def cold_vs_warm(phase: str) -> str:
    """The metric of a phase's cold-over-warm delta."""
    return f"{phase}_cold_vs_warm_delta"


def first_shot(phase: str) -> str:
    """The metric of a warm cell's shot-1 value (the median over its processes' shot 1)."""
    return f"{phase}_first_shot"


def steady(phase: str, state: str) -> str:
    """The metric of how many of a warm cell's series fall in a steady-state class in one phase."""
    return f"{phase}_series_{state.replace(' ', '_').replace('-', '_')}"


def lowest(phase: str) -> str:
    return f"{phase}_lowest"


def highest(phase: str) -> str:
    return f"{phase}_highest"


COLD_WARM_DELTA = cold_vs_warm(SPEED)
# Every metric this family makes (the speed-up's point is the workload table's; its interval is here).
ANSWER_METRICS = frozenset(
    {made for phase in PHASES for made in comparison_metrics(cold_vs_warm(phase))}
    | {cold_vs_warm(beside) for beside in BESIDE.values()}
    | {metric for phase in PHASES for side in (phase, first_shot(phase))
       for metric in (lowest(side), highest(side))}
    | {first_shot(phase) for phase in PHASES}
    | {steady(phase, state) for phase in PHASES for state in CLASSES}
    | set(comparison_metrics(SPEEDUP_METRIC)[1:])
    | {BEST_MODE, MODES_PASSING}
)  # fmt: skip


def answer_figures(catalog: Catalog) -> list[figure.Figure]:
    cells = {cell_id(cell): (cell, rows) for cell, rows in group_cells(catalog.shots)}
    figures: list[figure.Figure] = []
    done: set[tuple[str, str]] = set()  # the sides whose spread is made
    for warm, warm_rows in cells.values():
        cold = cells.get(cell_id(cold_sibling(warm)))
        # a workload cell asks the cold/warm question only where its config ran cold processes
        if warm["protocol"] == "warm" and (warm["workload"] == BASE_WORKLOAD or cold is not None):
            for phase in PHASES:
                figures += _phase_figures(catalog, warm, warm_rows, cold, phase, done)
    figures += _best_modes(catalog, cells)
    return figures


def _phase_figures(
    catalog: Catalog, warm: Cell, warm_rows: pd.DataFrame, cold: tuple | None, phase: str, done: set
) -> list[figure.Figure]:
    """One phase's comparison, the number beside it, and each side's spread."""
    made = _first_vs_warm(catalog, warm, warm_rows, cold, phase)
    if not made:
        return []
    paired = _is_paired(made[0])
    if phase in BESIDE:
        made += _first_vs_warm(catalog, warm, warm_rows, cold, BESIDE[phase], paired, point_only=True)
    made += _side_figures(catalog, warm, warm_rows, phase, done, first=False)
    made += _steady_figures(catalog, warm, warm_rows, phase)
    if paired:
        return made + _side_figures(catalog, warm, warm_rows, phase, done, first=True)
    return made + _side_figures(catalog, *cold, phase, done, first=False)


def _steady_figures(catalog: Catalog, warm: Cell, rows: pd.DataFrame, phase: str) -> list[figure.Figure]:
    """How many of the cell's warm series are flat, warmed up, slowed down or reached no steady state
    in one phase (figures.steady_state); none where no series has enough warm shots."""
    every_warm_shot = WarmRule(1.0).select(rows, phase)  # shot 2 on of each series' longest run
    if every_warm_shot.rows.empty:
        return []
    params = {"fraction": catalog.warm_fraction, "margin": catalog.verdict_margin}
    made = [
        figure.from_shots(steady(phase, state), warm, every_warm_shot, "count_steady_state", [phase],
                          unit="series", parameters={**params, "class": state},
                          formula=f"warm series whose {phase} is '{state}' (of those with at least three "
                          f"warm shots): {STEADY_METHOD}", computed_by=answer_figures)
        for state in CLASSES
    ]  # fmt: skip
    return made if made[0].value is not None else []


def _is_paired(point: figure.Figure) -> bool:
    return '"paired": true' in point.parameters


def _first_vs_warm(
    catalog: Catalog,
    warm: Cell,
    warm_rows: pd.DataFrame,
    cold: tuple | None,
    phase: str,
    paired: bool | None = None,
    point_only: bool = False,
) -> list[figure.Figure]:
    """Shot 1 over the warm shots in one phase (paired per process where the warm series have a shot 1,
    else the cold sibling's processes against the warm series), with its interval and verdict; nothing
    where a side keeps no shot."""
    warm_kept = catalog.rule("warm").select(warm_rows, phase)
    firsts = ColdRule().select(warm_rows, phase)
    if paired is None:
        paired = bool(set(firsts.rows["process_id"]) & set(warm_kept.rows["process_id"]))
    if paired:
        words = f"shot 1 {phase} / warm {phase} of the same process"
        pair = Pair(cold_vs_warm(phase), phase, warm, warm, "protocol", True, warm, None, words, paired=True,
                    level=catalog.verdict_level)  # fmt: skip
        selections: tuple[Selection, Selection] = (firsts, warm_kept)
    elif cold is not None:
        cold_cell, cold_rows = cold
        pair = Pair(cold_vs_warm(phase), phase, cold_cell, warm, "protocol", True, warm, cold_cell,
                    f"cold {phase} / warm {phase}")  # fmt: skip
        selections = (catalog.rule("cold").select(cold_rows, phase), warm_kept)
    else:
        return []
    if any(s.rows.empty for s in selections):
        return []
    if point_only:
        return [comparison_point(pair, selections, answer_figures)]
    return comparison_figures(pair, selections, catalog.verdict_margin, answer_figures)


def _side_figures(
    catalog: Catalog, cell: Cell, rows: pd.DataFrame, phase: str, done: set, first: bool
) -> list[figure.Figure]:
    """A side's lowest and highest process in one phase, once per cell (and, for the first shots of a
    warm cell, their median: the cell's own median is its warm shots')."""
    metric = first_shot(phase) if first else phase
    key = (cell_id(cell), metric)
    if key in done:
        return []
    done.add(key)
    rule = ColdRule() if first else catalog.rule(cell["protocol"])
    selection = rule.select(rows, phase)
    if selection.rows.empty:
        return []
    processes = {"processes": selection.rows["process_id"].nunique()}  # what the answer counts
    kept = "its shot 1" if first else f"the median of the shots the {cell['protocol']} rule kept from it"
    made = [
        figure.from_shots(aggregate(metric), cell, selection, aggregation, [phase], parameters=processes,
                          formula=f"{words} per-process {phase} (a process's value: {kept})",
                          computed_by=answer_figures)
        for aggregate, aggregation, words in ((lowest, "lowest_process", "lowest"),
                                              (highest, "highest_process", "highest"))
    ]  # fmt: skip
    if first:
        made.append(figure.from_shots(metric, cell, selection, "median", [phase], parameters=processes,
                                      formula=f"median {phase} of shot 1 of each warm series (its process's "
                                      "cold shot)", computed_by=answer_figures))  # fmt: skip
    return made


def _drafted(catalog: Catalog, cells) -> list[tuple[Cell, pd.DataFrame, Cell, pd.DataFrame]]:
    """(drafted cell, its shots, its no-draft cell, its shots) of every workload speed-up."""
    found = []
    for cell, rows in cells.values():
        base = {**cell, "spec_mode": NO_DRAFT}
        if cell["workload"] != BASE_WORKLOAD and cell["spec_mode"] != NO_DRAFT and cell_id(base) in cells:
            found.append((cell, rows, base, cells[cell_id(base)][1]))
    return found


def _best_modes(catalog: Catalog, cells) -> list[figure.Figure]:
    """Per workload's no-draft cell: the modes whose speed-up no gate strikes, their count and the
    best of them."""
    check = GateCheck(catalog)
    modes_of: dict[str, list[tuple[Cell, figure.Figure]]] = {}
    for cell, _rows, base, _base_rows in _drafted(catalog, cells):
        speedup = catalog.find(cell, SPEEDUP_METRIC)
        if speedup is not None:
            modes_of.setdefault(cell_id(base), []).append((cell, speedup))
    figures = []
    for base_id, modes in modes_of.items():
        base = cells[base_id][0]
        gates = {cell_id(mode): check.gates(speedup) for mode, speedup in modes}
        figures.append(_modes_passing(base, modes, gates))
        passing = [(mode, s) for mode, s in modes if not gates[cell_id(mode)] and s.value is not None]
        if passing:
            figures.append(_best(BEST_MODE, passing, base, _passing_note(modes, gates)))
    return figures


def _modes_passing(base: Cell, modes: list, gates: dict[str, list]) -> figure.Figure:
    passed = [not gates[cell_id(mode)] for mode, _speedup in modes]
    return figure.from_figures(
        MODES_PASSING,
        [speedup for _mode, speedup in modes],
        "count_passing",
        unit="modes",
        cell=base,
        parameters={"passing": passed, "modes": len(modes)},
        formula=f"modes (of {len(modes)}) whose speed-up no gate strikes: the task gate passed and was "
        "checked in every shot of the mode's cell and of the no-draft cell, and every output was compared "
        "with the no-draft one and equals it (caveats.gates, the rule every table strikes by)",
        computed_by=answer_figures,
        note=_passing_note(modes, gates),
    )


def _passing_note(modes: list, gates: dict[str, list]) -> str:
    left_out = [f"{mode['spec_mode']} ({gate_label(gates[cell_id(mode)])})" for mode, _s in modes
                if gates[cell_id(mode)]]  # fmt: skip
    return "left out: " + "; ".join(left_out) if left_out else "every mode passed"


def _best(metric: str, valued: list, base: Cell, note: str) -> figure.Figure:
    best_mode, _speedup = max(valued, key=lambda pair: pair[1].value)
    return figure.from_figures(
        metric,
        [speedup for _mode, speedup in valued],
        "highest_input",
        unit="ratio",
        cell=best_mode,
        baseline=base,
        formula=f"the highest {SPEEDUP_METRIC} among the modes no gate strikes (caveats.gates); the "
        "figure's cell is that mode's",
        computed_by=answer_figures,
        note=f"best of {len(valued)} mode(s) that passed; {note}",
    )
