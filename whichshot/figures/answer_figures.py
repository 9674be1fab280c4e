"""The answer block's figures. Per warm cell and its cold sibling: the cold-vs-warm decode delta,
its bootstrap interval and noise verdict (figures.noise), and each side's lowest and highest shot
beside its median. Per drafted workload cell: its speed-up's interval and verdict. Per workload:
how many modes passed their task gate (and the no-draft cell its own) and are lossless, and the
best speed-up among only those. Where a figure's shots include some that host_busy names, the same
figure again from its shots less those (metric + QUIET), set beside it; none where a side keeps no
shot ("too few quiet shots")."""

from dataclasses import dataclass

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.caveats.run_rules import busy_shot_ids
from whichshot.figures.cell_figures import AGGREGATION, FORMULA
from whichshot.figures.cells import Cell, cell_id, cold_sibling, group_cells
from whichshot.figures.noise import METHOD, verdict_words
from whichshot.figures.statistic import LESS_BUSY, Selection, joined
from whichshot.figures.workload_figures import SPEEDUP_METRIC
from whichshot.shots.axes import BASE_WORKLOAD, NO_DRAFT

SPEED = "decode_tok_s"
COLD_WARM_DELTA = "decode_tok_s_cold_vs_warm_delta"
LOWEST, HIGHEST = "decode_tok_s_lowest", "decode_tok_s_highest"
BEST_MODE = "best_mode_speedup_vs_none"
MODES_PASSING = "modes_gate_passed_lossless"
TASK_SHARE, LOSSLESS_SHARE = "task_done_share", "lossless_share"
VERDICT_UNIT = "verdict"  # 1 = beyond noise, 0 = within noise, no value = too few shots to tell
QUIET = "_quiet"  # the same figure from its shots less those host_busy names


def quiet(metric: str) -> str:
    """The metric of a figure computed again without the host-busy shots."""
    return f"{metric}{QUIET}"


def interval_metrics(metric: str) -> tuple[str, str, str]:
    """The metrics of a comparison's interval ends and noise verdict."""
    return f"{metric}_low", f"{metric}_high", f"{metric}_verdict"


_QUIET_METRICS = (quiet(SPEED), quiet(LOWEST), quiet(HIGHEST), quiet(COLD_WARM_DELTA),
                  *interval_metrics(quiet(COLD_WARM_DELTA)), quiet(SPEEDUP_METRIC),
                  *interval_metrics(quiet(SPEEDUP_METRIC)), quiet(BEST_MODE))  # fmt: skip
ANSWER_METRICS = frozenset({COLD_WARM_DELTA, *interval_metrics(COLD_WARM_DELTA), LOWEST, HIGHEST,
                            *interval_metrics(SPEEDUP_METRIC), BEST_MODE, MODES_PASSING,
                            *_QUIET_METRICS})  # fmt: skip


@dataclass(frozen=True)
class Side:
    """A cell's decode shots as its protocol's rule selects them, and those less the host-busy ones."""

    cell: Cell
    selection: Selection
    quiet: Selection | None  # None: no selected shot is host-busy

    def quiet_or_all(self) -> Selection:
        return self.selection if self.quiet is None else self.quiet


class Sides:
    """Each cell's Side, and its decode figure without the busy shots, made once per cell."""

    def __init__(self, catalog: Catalog, cells: dict[str, tuple[Cell, pd.DataFrame]]) -> None:
        self.catalog, self.cells, self.busy = catalog, cells, busy_shot_ids(catalog)
        self.made: dict[str, figure.Figure | None] = {}
        self.figures: list[figure.Figure] = []  # the quiet decode figures made, each once
        self._sides: dict[str, Side] = {}

    def side(self, cell: Cell) -> Side:
        key = cell_id(cell)
        if key not in self._sides:
            selection = self.catalog.rule(cell["protocol"]).select(self.cells[key][1], SPEED)
            self._sides[key] = Side(cell, selection, _without(selection, self.busy))
        return self._sides[key]

    def any_busy(self, *cells: Cell) -> bool:
        return any(self.side(cell).quiet is not None for cell in cells)

    def speed(self, side: Side) -> figure.Figure | None:
        """The side's decode figure without its busy shots (its own where none is busy); None if
        that leaves no shot."""
        if side.quiet is None:
            return self.catalog.find(side.cell, SPEED)
        key = cell_id(side.cell)
        if key not in self.made:
            self.made[key] = None if side.quiet.rows.empty else _quiet_speed(side)
            self.figures += [self.made[key]] if self.made[key] else []
        return self.made[key]


def _without(selection: Selection, busy: frozenset[str]) -> Selection | None:
    """The selection less the host-busy shots; None where it holds none."""
    is_busy = selection.rows["shot_id"].isin(busy)
    if not is_busy.any():
        return None
    label = f"{selection.label}, less {int(is_busy.sum())} host-busy shot(s)"
    return Selection(selection.rows[~is_busy], selection.examined, label, selection.shot_indices,
                     f"{selection.selected_by} {LESS_BUSY}", selection.problems)  # fmt: skip


def _quiet_speed(side: Side) -> figure.Figure:
    protocol = side.cell["protocol"]
    return figure.from_shots(
        quiet(SPEED),
        side.cell,
        side.quiet,
        AGGREGATION[protocol],
        [SPEED],
        formula=f"{FORMULA[protocol].format(column=SPEED)}, less the shots host_busy names",
        computed_by=answer_figures,
    )


def answer_figures(catalog: Catalog) -> list[figure.Figure]:
    cells = {cell_id(cell): (cell, rows) for cell, rows in group_cells(catalog.shots)}
    sides = Sides(catalog, cells)
    figures: list[figure.Figure] = []
    spread_done: set[str] = set()
    for cell, rows in cells.values():
        cold = cold_sibling(cell)
        if cell["protocol"] != "warm" or cell_id(cold) not in cells:
            continue
        figures += _cold_vs_warm(catalog, cell, rows, cold, cells[cell_id(cold)][1])
        figures += _quiet_cold_vs_warm(catalog, sides, sides.side(cold), sides.side(cell))
        for side, side_rows in ((cell, rows), (cold, cells[cell_id(cold)][1])):
            if cell_id(side) not in spread_done:
                spread_done.add(cell_id(side))
                figures += _spread(catalog, side, side_rows) + _quiet_spread(sides.side(side))
    quiet_speedups: dict[str, figure.Figure] = {}
    for cell, rows in cells.values():
        base = {**cell, "spec_mode": NO_DRAFT}
        if cell["workload"] != BASE_WORKLOAD and cell["spec_mode"] != NO_DRAFT and cell_id(base) in cells:
            figures += _speedup_interval(catalog, cell, rows, base, cells[cell_id(base)][1])
            figures += _quiet_speedup(catalog, sides, sides.side(cell), sides.side(base), quiet_speedups)
    figures += _best_modes(catalog, cells, sides, quiet_speedups)
    return sides.figures + figures


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


def _quiet_cold_vs_warm(catalog: Catalog, sides: Sides, cold: Side, warm: Side) -> list[figure.Figure]:
    """The cold-vs-warm delta and its interval without the host-busy shots, where either side has one."""
    if not sides.any_busy(cold.cell, warm.cell) or None in (
        catalog.find(c.cell, SPEED) for c in (cold, warm)
    ):
        return []
    comparison = _QuietComparison(
        COLD_WARM_DELTA, "relative_gap", "fraction", "protocol", less_one=True,
        formula=f"cold {SPEED} / warm {SPEED} - 1, each without the shots host_busy names",
        words=f"the interval of cold / warm {SPEED} - 1 without the host-busy shots",
    )  # fmt: skip
    return _quiet_comparison(comparison, sides, about=warm, reference=cold, numerator=cold)


def _speedup_interval(catalog: Catalog, cell: Cell, rows, base: Cell, base_rows) -> list[figure.Figure]:
    if catalog.find(cell, SPEEDUP_METRIC) is None:
        return []
    rule = catalog.rule(cell["protocol"])
    selections = (rule.select(rows, SPEED), rule.select(base_rows, SPEED))
    words = f"the interval of {SPEED} with {cell['spec_mode']} / without drafting"
    return _interval(SPEEDUP_METRIC, cell, base, (cell, base), selections, "spec_mode", words, less_one=False)


def _quiet_speedup(
    catalog: Catalog, sides: Sides, mode: Side, base: Side, made: dict[str, figure.Figure]
) -> list[figure.Figure]:
    """A drafted cell's speed-up and its interval without the host-busy shots (kept in `made`)."""
    if not sides.any_busy(mode.cell, base.cell) or catalog.find(mode.cell, SPEEDUP_METRIC) is None:
        return []
    spec_mode = mode.cell["spec_mode"]
    comparison = _QuietComparison(
        SPEEDUP_METRIC, "ratio", "ratio", "spec_mode", less_one=False,
        formula=f"{SPEED} with {spec_mode} / without drafting, each without the shots host_busy names",
        words=f"the interval of {SPEED} with {spec_mode} / without drafting, less host-busy shots",
    )  # fmt: skip
    figures = _quiet_comparison(comparison, sides, about=mode, reference=base, numerator=mode)
    if figures:
        made[cell_id(mode.cell)] = figures[0]
    return figures


@dataclass(frozen=True)
class _QuietComparison:
    """How one side-versus-reference figure reads without the host-busy shots."""

    metric: str
    aggregation: str
    unit: str
    side_axis: str
    less_one: bool
    formula: str
    words: str


def _quiet_comparison(
    how: _QuietComparison, sides: Sides, about: Side, reference: Side, numerator: Side
) -> list[figure.Figure]:
    """The figure of `about` against `reference` from their quiet speeds (`numerator` over the
    other), and its interval; nothing where a side keeps no quiet shot."""
    denominator = reference if numerator is about else about
    speeds = [sides.speed(numerator), sides.speed(denominator)]
    if None in speeds:
        return []  # a side keeps no quiet shot: the answer says "too few quiet shots"
    value = figure.from_figures(
        quiet(how.metric),
        speeds,
        how.aggregation,
        unit=how.unit,
        cell=about.cell,
        baseline=reference.cell,
        formula=how.formula,
        computed_by=answer_figures,
    )
    pair = (numerator.cell, denominator.cell)
    selections = (numerator.quiet_or_all(), denominator.quiet_or_all())
    interval = _interval(
        quiet(how.metric),
        about.cell,
        reference.cell,
        pair,
        selections,
        how.side_axis,
        how.words,
        how.less_one,
    )
    return [value, *interval]


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
        joined([side.selected_by, reference.selected_by]),
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
    return _spread_of(cell, catalog.rule(cell["protocol"]).select(rows, SPEED), "")


def _quiet_spread(side: Side) -> list[figure.Figure]:
    """The same, less the host-busy shots, where the cell has one."""
    return [] if side.quiet is None else _spread_of(side.cell, side.quiet, QUIET)


def _spread_of(cell: Cell, selection: Selection, suffix: str) -> list[figure.Figure]:
    if selection.rows.empty:
        return []
    less = ", less the shots host_busy names" if suffix else ""
    return [
        figure.from_shots(
            metric + suffix,
            cell,
            selection,
            aggregation,
            [SPEED],
            formula=f"{words} {SPEED} of the shots the {cell['protocol']} figure uses{less}",
            computed_by=answer_figures,
        )
        for metric, aggregation, words in ((LOWEST, "minimum", "lowest"), (HIGHEST, "maximum", "highest"))
    ]


def _best_modes(
    catalog: Catalog,
    cells: dict[str, tuple[Cell, pd.DataFrame]],
    sides: Sides,
    quiet_speedups: dict[str, figure.Figure],
) -> list[figure.Figure]:
    """Per workload's no-draft cell: the count of modes that passed every gate, and the best of them
    (again without the host-busy shots where some mode's speed-up rests on one)."""
    modes_of: dict[str, list[Cell]] = {}
    for cell, _rows in cells.values():
        base = {**cell, "spec_mode": NO_DRAFT}
        if cell["spec_mode"] != NO_DRAFT and catalog.find(cell, SPEEDUP_METRIC) is not None:
            modes_of.setdefault(cell_id(base), []).append(cell)
    figures = []
    for base_id, modes in modes_of.items():
        base = cells[base_id][0]
        figures += _best_mode(catalog, base, modes) + _quiet_best_mode(
            catalog, sides, base, modes, quiet_speedups
        )
    return figures


def _gated(catalog: Catalog, base: Cell, modes: list[Cell]) -> tuple[list, list[str], list]:
    """(the modes that passed every gate with their speed-ups, the others and why, the gate figures)."""
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
    return passing, left_out, checks


def _best_mode(catalog: Catalog, base: Cell, modes: list[Cell]) -> list[figure.Figure]:
    passing, left_out, checks = _gated(catalog, base, modes)
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
        formula = (
            f"the highest {SPEEDUP_METRIC} among the modes whose task gate passed (every shot, and the "
            "no-draft cell's) and that are lossless; the figure's cell is that mode's"
        )
        figures.append(
            _best(BEST_MODE, valued, base, formula, f"best of {len(valued)} mode(s) that passed; {note}")
        )
    return figures


def _quiet_best_mode(
    catalog: Catalog, sides: Sides, base: Cell, modes: list[Cell], quiet_speedups: dict[str, figure.Figure]
) -> list[figure.Figure]:
    """The best gated, lossless mode by its speed-up without the host-busy shots (its own speed-up
    where neither it nor the no-draft cell has one)."""
    passing = [(m, s) for m, s in _gated(catalog, base, modes)[0] if s.value is not None]
    if not any(sides.any_busy(mode, base) for mode, _speedup in passing):
        return []
    valued, too_few = [], []
    for mode, speedup in passing:
        if not sides.any_busy(mode, base):
            valued.append((mode, speedup))
        elif cell_id(mode) in quiet_speedups and quiet_speedups[cell_id(mode)].value is not None:
            valued.append((mode, quiet_speedups[cell_id(mode)]))
        else:
            too_few.append(mode["spec_mode"])
    if not valued:
        return []  # too few quiet shots for every mode: the answer says so
    formula = (f"the highest {SPEEDUP_METRIC} without the shots host_busy names, among the modes whose task "
               "gate passed (every shot, and the no-draft cell's) and that are lossless")  # fmt: skip
    note = f"best of {len(valued)} mode(s) that passed, without the host-busy shots" + (
        f"; too few quiet shots: {', '.join(too_few)}" if too_few else ""
    )
    return [_best(quiet(BEST_MODE), valued, base, formula, note)]


def _best(
    metric: str, valued: list[tuple[Cell, figure.Figure]], base: Cell, formula: str, note: str
) -> figure.Figure:
    best_mode, _best_speedup = max(valued, key=lambda pair: pair[1].value)
    return figure.from_figures(
        metric,
        [speedup for _mode, speedup in valued],
        "highest_input",
        unit="ratio",
        cell=best_mode,
        baseline=base,
        formula=formula,
        computed_by=answer_figures,
        note=note,
    )


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
