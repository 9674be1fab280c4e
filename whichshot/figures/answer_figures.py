"""The answer block's figures. Per warm cell and its cold sibling, for each phase (TTFT, prefill,
decode): cold over warm with the process as the unit, its interval and verdict
(figures.comparison), and each side's lowest and highest process beside its median. Per workload's
no-draft cell: how many speculative modes passed every gate (caveats.gates, the rule the tables
strike by) and the best of them. Where the shots a comparison uses include some that host_busy
names, the same figures again from the same functions with the rule less those shots
(statistic.LessBusyRule), under the metric + QUIET; none where a side keeps no shot ("too few quiet
shots")."""

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.caveats.gates import GateCheck, gate_label
from whichshot.figures.caveats.run_rules import busy_shot_ids
from whichshot.figures.cell_figures import AGGREGATION, FORMULA
from whichshot.figures.cells import Cell, cell_id, cold_sibling, group_cells
from whichshot.figures.comparison import Pair, comparison_figures, comparison_metrics
from whichshot.figures.statistic import LessBusyRule, Rule
from whichshot.figures.workload_figures import SPEEDUP_METRIC, speedup_pair
from whichshot.shots.axes import BASE_WORKLOAD, NO_DRAFT

PHASES = ("ttft_s", "prefill_tok_s", "decode_tok_s")  # the order the answer lists them in
SPEED = "decode_tok_s"
BEST_MODE = "best_mode_speedup_vs_none"
MODES_PASSING = "modes_gate_passed_lossless"
TASK_SHARE, LOSSLESS_SHARE = "task_done_share", "lossless_share"
QUIET = "_quiet"  # the same figure from its shots less those host_busy names


def quiet(metric: str) -> str:
    """The metric of a figure computed again without the host-busy shots."""
    return f"{metric}{QUIET}"


def cold_vs_warm(phase: str) -> str:
    """The metric of a phase's cold-over-warm delta."""
    return f"{phase}_cold_vs_warm_delta"


def lowest(phase: str) -> str:
    return f"{phase}_lowest"


def highest(phase: str) -> str:
    return f"{phase}_highest"


COLD_WARM_DELTA = cold_vs_warm(SPEED)
# Every metric this family makes (the speed-up's point is the workload table's; its interval is here).
ANSWER_METRICS = frozenset(
    {made for phase in PHASES for metric in (cold_vs_warm(phase), quiet(cold_vs_warm(phase)))
     for made in comparison_metrics(metric)}
    | {metric + suffix for phase in PHASES for metric in (lowest(phase), highest(phase))
       for suffix in ("", QUIET)}
    | {quiet(phase) for phase in PHASES}
    | set(comparison_metrics(SPEEDUP_METRIC)[1:]) | set(comparison_metrics(quiet(SPEEDUP_METRIC)))
    | {BEST_MODE, quiet(BEST_MODE), MODES_PASSING}
)  # fmt: skip


@dataclass(frozen=True)
class Variant:
    """The figures as the protocol's rule picks their shots, or less the host-busy shots."""

    suffix: str  # "" or QUIET
    rule_of: Callable[[str], Rule]  # protocol -> the rule that picks a cell's shots

    def metric(self, metric: str) -> str:
        return metric + self.suffix


def answer_figures(catalog: Catalog) -> list[figure.Figure]:
    cells = {cell_id(cell): (cell, rows) for cell, rows in group_cells(catalog.shots)}
    busy = busy_shot_ids(catalog)
    plain = Variant("", catalog.rule)
    less_busy = Variant(QUIET, lambda protocol: LessBusyRule(catalog.rule(protocol), busy))
    figures: list[figure.Figure] = []
    sides_done: set[tuple[str, str, str]] = set()
    for warm, warm_rows in cells.values():
        cold = cold_sibling(warm)
        if warm["protocol"] != "warm" or cell_id(cold) not in cells:
            continue
        sides = ((cold, cells[cell_id(cold)][1]), (warm, warm_rows))
        for phase in PHASES:
            for variant in (plain, less_busy) if _any_busy(sides, phase, busy, plain) else (plain,):
                made = _cold_vs_warm(catalog, variant, sides, phase)
                figures += made
                for side, rows in sides if made else ():
                    figures += _side_figures(catalog, variant, side, rows, phase, busy, sides_done)
    quiet_speedups = _quiet_speedups(catalog, cells, busy, plain, less_busy)
    figures += [made for comparison in quiet_speedups.values() for made in comparison or ()]
    figures += _best_modes(catalog, cells, quiet_speedups)
    return figures


def _any_busy(sides, column: str, busy: frozenset[str], plain: Variant) -> bool:
    """Whether the plain rule picks a host-busy shot on either side."""
    return bool(busy) and any(
        plain.rule_of(cell["protocol"]).select(rows, column).rows["shot_id"].isin(busy).any()
        for cell, rows in sides
    )


def _cold_vs_warm(catalog: Catalog, variant: Variant, sides, phase: str) -> list[figure.Figure]:
    """Cold over warm in one phase, with its interval and verdict; nothing where a side keeps no shot."""
    (cold, cold_rows), (warm, warm_rows) = sides
    selections = tuple(variant.rule_of(c["protocol"]).select(rows, phase) for c, rows in sides)
    if any(s.rows.empty for s in selections):
        return []
    less = ", each without the shots host_busy names" if variant.suffix else ""
    words = f"cold {phase} / warm {phase}{less}"
    pair = Pair(variant.metric(cold_vs_warm(phase)), phase, cold, warm, "protocol", True, warm, cold, words)
    return comparison_figures(pair, selections, catalog.verdict_margin, answer_figures)


def _side_figures(
    catalog: Catalog, variant: Variant, cell: Cell, rows: pd.DataFrame, phase: str, busy, done: set
) -> list[figure.Figure]:
    """A side's lowest and highest process (and, less the busy shots, its median) in one phase, once
    per cell; none for the quiet variant where the side has no busy shot (it keeps its own)."""
    key = (cell_id(cell), phase, variant.suffix)
    rule = variant.rule_of(cell["protocol"])
    if key in done or (variant.suffix and not rule.leaves_out_any(rows, phase)):
        return []
    done.add(key)
    selection = rule.select(rows, phase)
    if selection.rows.empty:
        return []
    less = ", less the shots host_busy names" if variant.suffix else ""
    processes = {"processes": selection.rows["process_id"].nunique()}  # what the answer counts
    made = [
        figure.from_shots(variant.metric(metric), cell, selection, aggregation, [phase], parameters=processes,
                          formula=f"{words} per-process {phase} (a process's value: the median of the "
                          f"shots the {cell['protocol']} rule kept from it){less}",
                          computed_by=answer_figures)
        for metric, aggregation, words in ((lowest(phase), "lowest_process", "lowest"),
                                           (highest(phase), "highest_process", "highest"))
    ]  # fmt: skip
    if variant.suffix:
        protocol = cell["protocol"]
        made.append(figure.from_shots(quiet(phase), cell, selection, AGGREGATION[protocol], [phase],
                                      formula=f"{FORMULA[protocol].format(column=phase)}{less}",
                                      computed_by=answer_figures))  # fmt: skip
    return made


def _drafted(catalog: Catalog, cells) -> list[tuple[Cell, pd.DataFrame, Cell, pd.DataFrame]]:
    """(drafted cell, its shots, its no-draft cell, its shots) of every workload speed-up."""
    found = []
    for cell, rows in cells.values():
        base = {**cell, "spec_mode": NO_DRAFT}
        if cell["workload"] != BASE_WORKLOAD and cell["spec_mode"] != NO_DRAFT and cell_id(base) in cells:
            found.append((cell, rows, base, cells[cell_id(base)][1]))
    return found


def _quiet_speedups(
    catalog: Catalog, cells, busy, plain: Variant, less_busy: Variant
) -> dict[str, list[figure.Figure] | None]:
    """Per drafted cell whose speed-up rests on a host-busy shot: that speed-up (its interval and
    verdict) without them; None where a side keeps no quiet shot."""
    made: dict[str, list[figure.Figure] | None] = {}
    for cell, rows, base, base_rows in _drafted(catalog, cells):
        sides = ((cell, rows), (base, base_rows))
        if not _any_busy(sides, SPEED, busy, plain):
            continue
        rule = less_busy.rule_of(cell["protocol"])
        selections = (rule.select(rows, SPEED), rule.select(base_rows, SPEED))
        if any(s.rows.empty for s in selections):
            made[cell_id(cell)] = None
            continue
        pair = speedup_pair(cell, quiet(SPEEDUP_METRIC))
        made[cell_id(cell)] = comparison_figures(pair, selections, catalog.verdict_margin, answer_figures)
    return made


def _best_modes(catalog: Catalog, cells, quiet_speedups: dict[str, list]) -> list[figure.Figure]:
    """Per workload's no-draft cell: the modes whose speed-up no gate strikes, their count and the
    best of them (again by the speed-up without the host-busy shots where one was made)."""
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
            figures.append(_best(BEST_MODE, passing, base, "", _passing_note(modes, gates)))
        figures += _quiet_best_mode(base, passing, quiet_speedups, _passing_note(modes, gates))
    return figures


def _quiet_best_mode(base: Cell, passing: list, quiet_speedups: dict, note: str) -> list[figure.Figure]:
    """The best passing mode by its speed-up without the host-busy shots (its own where neither it nor
    the no-draft cell has one); nothing where no passing mode rests on a busy shot, or none keeps one."""
    if not any(cell_id(mode) in quiet_speedups for mode, _speedup in passing):
        return []
    valued, too_few = [], []
    for mode, speedup in passing:
        if cell_id(mode) not in quiet_speedups:
            valued.append((mode, speedup))
        elif (made := quiet_speedups[cell_id(mode)]) and made[0].value is not None:
            valued.append((mode, made[0]))
        else:
            too_few.append(mode["spec_mode"])
    if not valued:
        return []  # too few quiet shots for every mode: the answer says so
    note += f"; too few quiet shots: {', '.join(too_few)}" if too_few else ""
    return [_best(quiet(BEST_MODE), valued, base, " without the host-busy shots", note)]


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


def _best(metric: str, valued: list, base: Cell, without: str, note: str) -> figure.Figure:
    best_mode, _speedup = max(valued, key=lambda pair: pair[1].value)
    return figure.from_figures(
        metric,
        [speedup for _mode, speedup in valued],
        "highest_input",
        unit="ratio",
        cell=best_mode,
        baseline=base,
        formula=f"the highest {SPEEDUP_METRIC}{without} among the modes no gate strikes (caveats.gates); the "
        "figure's cell is that mode's",
        computed_by=answer_figures,
        note=f"best of {len(valued)} mode(s) that passed; {note}",
    )
