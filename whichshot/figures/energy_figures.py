"""Energy per token you can trust: per cell, J per output token (decode energy, first token to end)
and J per prefill token (request to first token) from the GPU's energy counter, over every stream's
tokens where several requests were in flight (they shared the counter), each with a stability
verdict (enough counter updates, the first token near a counter reading, steady clock, power and
counter agreeing, no thermal slowdown, the streams' first tokens close together). Where each shot of
a back-to-back warm series is too short, the series as a whole gives the figure, and its label says
so. No counter (a CPU run): no figure at all."""

from dataclasses import dataclass

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.cell_figures import measured_here
from whichshot.figures.cells import Cell, group_cells, series_of
from whichshot.figures.constants import ENERGY_CLOCK_SPREAD, ENERGY_SPLIT_LIMIT, MIN_ENERGY_COUNTER_UPDATES
from whichshot.figures.statistic import Selection, index_ranges, longest_run
from whichshot.shots.axes import ONE_STREAM


def energy_figures(catalog: Catalog) -> list[figure.Figure]:
    shots = catalog.shots
    figures = []
    for cell, rows in group_cells(shots):
        # no counter (a CPU run): no energy figure at all
        if measured_here(shots, cell, "gpu_energy_j") and not (rows["status"] == "skipped").all():
            figures += [_energy(catalog, cell, rows, phase) for phase in ENERGY_PHASES]
    return figures


@dataclass(frozen=True)
class EnergyPhase:
    """One energy-per-token figure: the shots' energy of one part of the shot over their tokens."""

    metric: str
    energy: str  # the shot column of that part's counter energy
    tokens: str  # the tokens it is divided by
    updates: str  # counter updates that part rests on
    window: tuple[str, str]  # the shot columns its window runs between
    words: str


ENERGY_PHASES = (
    EnergyPhase("energy_j_per_output_token", "decode_gpu_energy_j", "streams_output_tokens",
                "decode_energy_counter_updates", ("first_token_mono_s", "t_end_mono_s"),
                "decode energy (first token to end) over every stream's output tokens"),
    EnergyPhase("energy_j_per_prefill_token", "prefill_gpu_energy_j", "streams_prompt_tokens",
                "prefill_energy_counter_updates", ("t_request_mono_s", "first_token_mono_s"),
                "prefill energy (request to first token) over every stream's prompt tokens"),
)  # fmt: skip
ENERGY_PHASE = {phase.metric: phase for phase in ENERGY_PHASES}
STABLE, UNSTABLE, NOT_MEASURED = "stable", "unstable", "not measured"
# The selected_by of a warm series taken whole where its shots are each too short (_back_to_back).
BACK_TO_BACK = "back-to-back series"


@dataclass(frozen=True)
class EnergyVerdict:
    """Whether an energy-per-token figure can be trusted, and why (or why not)."""

    state: str  # STABLE, UNSTABLE or NOT_MEASURED
    reasons: tuple[str, ...]  # why unstable or not measured; for stable, what it rests on

    @property
    def text(self) -> str:
        return f"{self.state}: {'; '.join(self.reasons)}" if self.reasons else self.state


def energy_verdict(rows: pd.DataFrame, phase: EnergyPhase) -> EnergyVerdict:
    """The stability rule on the shots an energy figure uses. Stable when their windows of this
    part hold at least MIN_ENERGY_COUNTER_UPDATES counter updates, the first token lies within
    ENERGY_SPLIT_LIMIT of the windows' time from a counter reading, their SM clock medians spread
    at most ENERGY_CLOCK_SPREAD, NVML's power agrees with the counter in every one
    (gpu_power_reliable) and none saw a thermal slowdown; with several streams in flight, also where
    the other streams' first tokens came within ENERGY_SPLIT_LIMIT of the windows' time after stream
    1's (the split's point). Not measured without counter energy or without every stream's tokens."""
    used = rows[rows[phase.energy].notna()] if len(rows) else rows
    if used.empty:
        return EnergyVerdict(NOT_MEASURED, ("no counter energy for this part of the shots",))
    untallied = int(used[phase.tokens].isna().sum())
    if untallied:
        return EnergyVerdict(NOT_MEASURED, (f"{untallied} shot(s) without {phase.tokens}: several streams "
                                            "shared the counter and the shot kept stream 1's tokens only "
                                            "(recorded before version 8)",))  # fmt: skip
    n = len(used)
    updates = int(used[phase.updates].fillna(0).sum())
    seconds = float((used[phase.window[1]] - used[phase.window[0]]).sum())
    split = float(used["energy_split_gap_s"].sum()) / seconds if seconds > 0 else float("inf")
    clocks = used["sm_clock_median_mhz"].dropna()
    spread = (clocks.max() - clocks.min()) / clocks.median() if len(clocks) else None
    agree, thermal = _count_true(used["gpu_power_reliable"]), _count_true(used["thermal_throttle_seen"])
    evidence = [
        f"{updates} counter update{'' if updates == 1 else 's'} in the windows "
        f"(min_energy_counter_updates {MIN_ENERGY_COUNTER_UPDATES})",
        f"first token {split:.1%} of the windows' {seconds:.1f} s from a counter reading "
        f"(energy_split_limit {ENERGY_SPLIT_LIMIT:.0%})",
        "SM clock not read" if spread is None else
        f"SM clock medians spread {spread:.1%} (energy_clock_spread {ENERGY_CLOCK_SPREAD:.0%})",
        f"NVML power agrees with the counter in {agree} of {n} shots",
        f"thermal slowdown in {thermal} of {n} shots",
    ]  # fmt: skip
    failed = [
        updates < MIN_ENERGY_COUNTER_UPDATES,
        split > ENERGY_SPLIT_LIMIT,
        spread is None or spread > ENERGY_CLOCK_SPREAD,
        agree < n,
        thermal > 0,
    ]
    if _several_streams(used):
        late_s = float(_later_first_tokens_s(used).sum())
        late = late_s / seconds if seconds > 0 else float("inf")
        evidence.append(
            f"the other streams' first tokens up to {late_s:.2f} s (summed over the shots) after stream 1's, "
            f"where the energy is split: {late:.1%} of the windows' time (energy_split_limit "
            f"{ENERGY_SPLIT_LIMIT:.0%})"
        )
        failed.append(late > ENERGY_SPLIT_LIMIT)
    if any(failed):
        return EnergyVerdict(UNSTABLE, tuple(e for e, bad in zip(evidence, failed, strict=True) if bad))
    return EnergyVerdict(STABLE, tuple(evidence))


def _several_streams(rows: pd.DataFrame) -> bool:
    return bool((pd.to_numeric(rows["parallel_streams"], errors="coerce") > ONE_STREAM).any())


def _later_first_tokens_s(rows: pd.DataFrame) -> pd.Series:
    """Per shot, how long after stream 1's first token (where the energy is split) the last stream's
    came, as far as the longest TTFT tells: that stream's prefill there is counted as decode energy."""
    return (rows["stream_ttft_max_s"] - rows["ttft_s"]).clip(lower=0).fillna(0)


def _count_true(values: pd.Series) -> int:
    """Rows whose flag is exactly true (missing is not)."""
    return int(sum(v is not None and not pd.isna(v) and bool(v) for v in values))


def _energy(catalog: Catalog, cell: Cell, rows: pd.DataFrame, phase: EnergyPhase) -> figure.Figure:
    """Energy per token of one part of the shot over the cell's statistic shots (the protocol's
    rule); a warm back-to-back series whose shots are each too short for the update rule gives
    its whole steady run instead (every shot after the process's first), and says so."""
    selection = catalog.rule(cell["protocol"]).select(rows, phase.energy)
    if cell["protocol"] == "warm" and cell["rest_s"] == 0:
        selection = _back_to_back(rows, phase, selection)
    verdict = energy_verdict(selection.rows, phase)
    if verdict.state == NOT_MEASURED:
        selection = Selection(
            rows.iloc[0:0], rows, selection.label, "", selection.selected_by, selection.problems
        )
    return figure.from_shots(
        phase.metric,
        cell,
        selection,
        "ratio_of_sums",
        [phase.energy, phase.tokens],
        unit="J/token",
        formula=f"sum of {phase.energy} / sum of {phase.tokens} over the shots used: {phase.words}",
        computed_by=energy_figures,
        note="; ".join([f"energy verdict: {verdict.text}", *selection.problems]),
    )


def _back_to_back(rows: pd.DataFrame, phase: EnergyPhase, selection: Selection) -> Selection:
    """The rule's selection, or, where each of its shots holds fewer counter updates of this part
    than the update rule asks and the series ran back to back (0 s rest), every shot of each
    series' longest run after the process's first (one-time work): the steady series as a whole."""
    updates = selection.rows[phase.updates].fillna(0)
    short = len(updates) > 0 and bool((updates < MIN_ENERGY_COUNTER_UPDATES).all())
    if not short or updates.sum() >= MIN_ENERGY_COUNTER_UPDATES:
        return selection
    runs, words = [], []
    for _job, series in series_of(rows):
        run = longest_run(series)
        run = run[(run["shot_index"] > 1) & run[phase.energy].notna()]
        if len(run) >= 2:
            runs.append(run)
            words.append(f"shots {index_ranges(run['shot_index'])}")
    if not runs or sum(len(r) for r in runs) <= len(updates):
        return selection
    whole = pd.concat(runs)
    label = (
        f"warm: from a back-to-back series of {len(whole)} shots ({'; '.join(words)} of one process each, "
        f"0 s rest, {len(runs)} series)"
    )
    return Selection(whole, rows, label, index_ranges(whole["shot_index"]), BACK_TO_BACK, selection.problems)
