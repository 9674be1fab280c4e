"""Caveats about sensor readings and the power wall: sensors not read or read from a weaker source,
sensors that stopped, summaries of too few samples, power medians that disagree with the energy
counter, energy of shots too short for the counter, energy per token that fails the stability
rule, clocks that dropped with thermals normal, and warm speeds the clock does not explain."""

from whichshot.figures.catalog import Catalog
from whichshot.figures.caveats.finding import whole_cells
from whichshot.figures.cells import ENGINE_MODEL, group_cells
from whichshot.figures.clock_figures import (
    BEST_CLOCK_METRIC,
    CLOCK_CHECK_METRICS,
    dropped_clock_rows,
    throttle_reasons,
)
from whichshot.figures.constants import (
    CLOCK_DROP_FRACTION,
    CLOCK_ONLY_TOLERANCE,
    ENERGY_COUNTER_STEP_S,
    ENERGY_UNCERTAINTY_LIMIT,
    MIN_TELEMETRY_SAMPLES,
)
from whichshot.figures.energy_figures import ENERGY_PHASE, UNSTABLE, energy_verdict
from whichshot.figures.statistic import ok_rows
from whichshot.shots.caveat import Finding, columns_from, flag_false, ids
from whichshot.shots.upgrade import VERSION_1_GPU
from whichshot.telemetry.gpus import SEEN_ON_SAMPLED

TELEMETRY = columns_from("telemetry")
GPU_TELEMETRY = frozenset(c for c in TELEMETRY if not c.startswith(("cpu_", "telemetry_")))
ENERGY = frozenset({"gpu_energy_j", "gpu_energy_power_w", "energy_j_per_token"})
RESIDUAL_METRICS = frozenset(metrics[1] for metrics in CLOCK_CHECK_METRICS.values())


def _names(joined_values) -> list[str]:
    return sorted({n for joined in joined_values.dropna() for n in joined.split("|") if n})


def sensor_not_readable(catalog: Catalog) -> Finding | None:
    shots = catalog.shots
    unread = shots[shots["telemetry_not_measured"].notna()]
    names = _names(unread["telemetry_not_measured"])
    if not names:
        return None
    return Finding(
        "sensor_not_readable",
        "Not measured on this machine (no value is shown for them): " + ", ".join(names) + ".",
        ids(unread),
    )


def sensor_fallback(catalog: Catalog) -> Finding | None:
    shots = catalog.shots
    notes = _names(shots["telemetry_fallbacks"])
    if not notes:
        return None
    return Finding(
        "sensor_fallback",
        "Read from a weaker source: " + "; ".join(notes) + ".",
        whole_cells(shots, shots["telemetry_fallbacks"].notna()),
        columns=TELEMETRY,
    )


def telemetry_gap(catalog: Catalog) -> Finding | None:
    shots = catalog.shots
    gapped = shots[shots["telemetry_gaps"].notna()]
    if gapped.empty:
        return None
    return Finding(
        "telemetry_gap",
        f"A sensor stopped answering mid-run: {len(gapped)} shot(s) have no reading from it from the failure "
        "on (not measured, never filled in); the shots themselves ran and count. "
        + "; ".join(_names(gapped["telemetry_gaps"])[:4])
        + ".",
        whole_cells(shots, shots["telemetry_gaps"].notna()),
        columns=TELEMETRY,
    )


def gpu_not_confirmed(catalog: Catalog) -> Finding | None:
    shots = catalog.shots
    sampled = shots["telemetry_gpus"].notna() | (shots["telemetry_gpu_choice"] == VERSION_1_GPU)
    unconfirmed = (shots["status"] == "ok") & sampled & (shots["telemetry_gpu_check"] != SEEN_ON_SAMPLED)
    if not unconfirmed.any():
        return None
    said = shots.loc[unconfirmed, "telemetry_gpu_check"].fillna("not checked: " + VERSION_1_GPU)
    return Finding(
        "gpu_not_confirmed",
        f"In {int(unconfirmed.sum())} shot(s) the GPU telemetry is not known to be the engine's GPU: "
        + "; ".join(sorted(set(said)))
        + ". Its clocks, power and energy may describe another GPU.",
        whole_cells(shots, unconfirmed),
        columns=GPU_TELEMETRY,
    )


def few_telemetry_samples(catalog: Catalog) -> Finding | None:
    shots = catalog.shots
    sampled = shots["telemetry_backends"].notna() | shots["telemetry_samples"].notna()
    few = (shots["status"] == "ok") & sampled & (shots["telemetry_samples"].fillna(0) < MIN_TELEMETRY_SAMPLES)
    if not few.any():
        return None
    return Finding(
        "few_telemetry_samples",
        f"{int(few.sum())} shot(s) held fewer than {MIN_TELEMETRY_SAMPLES} telemetry samples "
        "(min_telemetry_samples): their clock, power and temperature summaries rest on one reading or none.",
        whole_cells(shots, few),
        columns=TELEMETRY,
    )


def power_reading_unreliable(catalog: Catalog) -> Finding | None:
    shots = catalog.shots
    off = (shots["status"] == "ok") & flag_false(shots["gpu_power_reliable"])
    if not off.any():
        return None
    ratios = (shots.loc[off, "gpu_power_median_w"] / shots.loc[off, "gpu_energy_power_w"]).dropna()
    return Finding(
        "power_reading_unreliable",
        f"In {int(off.sum())} shot(s) NVML's power median (a trailing average) is {ratios.min():.2f}-"
        f"{ratios.max():.2f} of the energy counter's mean power over the shot, outside "
        "power_counter_agreement: "
        "it partly describes what ran before the shot. gpu_energy_power_w (from the counter) is the shot's "
        "power.",
        whole_cells(shots, off),
        columns=frozenset({"gpu_power_median_w"}),
    )


def energy_counter_uncertain(catalog: Catalog) -> Finding | None:
    shots = ok_rows(catalog.shots, "gpu_energy_j")
    seconds = shots["t_end_mono_s"] - shots["t_request_mono_s"]
    short = 2 * ENERGY_COUNTER_STEP_S / seconds > ENERGY_UNCERTAINTY_LIMIT
    if not short.any():
        return None
    return Finding(
        "energy_counter_uncertain",
        f"{int(short.sum())} shot(s) lasted less than "
        f"{2 * ENERGY_COUNTER_STEP_S / ENERGY_UNCERTAINTY_LIMIT:g} s: "
        f"the energy counter moves in steps of about {ENERGY_COUNTER_STEP_S:g} s (energy_counter_step_s), so "
        f"their energy is uncertain by more than {ENERGY_UNCERTAINTY_LIMIT:.0%} (shortest "
        f"{seconds[short].min():.2f} s).",
        whole_cells(catalog.shots, catalog.shots["shot_id"].isin(shots.loc[short, "shot_id"])),
        columns=ENERGY,
    )


def _energy_unstable(catalog: Catalog, caveat_id: str, metric: str, words: str) -> Finding | None:
    """The energy figures of this metric whose shots fail the stability rule (a counter exists:
    a cell without one has no such figure, or one without a value)."""
    phase = ENERGY_PHASE[metric]
    by_id = catalog.shots.set_index("shot_id", drop=False)
    found = []
    for f in catalog.figures:
        if f.metric == metric and f.value is not None:
            verdict = energy_verdict(by_id.loc[f.shot_ids], phase)
            if verdict.state == UNSTABLE:
                found.append((f, verdict))
    if not found:
        return None
    examples = "; ".join(f"{f.cell_id}: {'; '.join(v.reasons)}" for f, v in found[:2])
    return Finding(
        caveat_id,
        f"{len(found)} cell(s)' {words} rest on counter energy that fails the stability rule (enough "
        "counter updates, first token near a counter reading, steady SM clock, NVML power agreeing "
        f"with the counter, no thermal slowdown): a number, not a trustworthy one. E.g. {examples}.",
        frozenset(s for f, _ in found for s in f.shot_ids),
        columns=frozenset({phase.energy}),
    )


# The caveat each energy-per-token metric carries where it fails the stability rule.
ENERGY_UNSTABLE = {
    "energy_j_per_output_token": "output_token_energy_unstable",
    "energy_j_per_prefill_token": "prefill_token_energy_unstable",
}


def output_token_energy_unstable(catalog: Catalog) -> Finding | None:
    metric = "energy_j_per_output_token"
    return _energy_unstable(catalog, ENERGY_UNSTABLE[metric], metric, "J per output token")


def prefill_token_energy_unstable(catalog: Catalog) -> Finding | None:
    metric = "energy_j_per_prefill_token"
    return _energy_unstable(catalog, ENERGY_UNSTABLE[metric], metric, "J per prefill token")


def clock_dropped_thermal_normal(catalog: Catalog) -> Finding | None:
    dropped = []
    for pair, rows in group_cells(catalog.shots, ENGINE_MODEL):
        best = catalog.find(pair, BEST_CLOCK_METRIC)
        if best is not None:
            dropped.append(dropped_clock_rows(rows, best.value))
    rows = [d for d in dropped if len(d)]
    if not rows:
        return None
    shot_ids = frozenset(s for d in rows for s in d["shot_id"])
    reasons = throttle_reasons(catalog.shots[catalog.shots["shot_id"].isin(shot_ids)])
    named = ", ".join(reasons) if reasons else "no clock-event reason at all"
    return Finding(
        "clock_dropped_thermal_normal",
        f"In {len(shot_ids)} shot(s) the GPU SM clock fell more than {CLOCK_DROP_FRACTION:.0%} below the "
        "best "
        f"clock seen for the same engine and model while no thermal slowdown was reported (reasons set: "
        f"{named}): a normal thermal state does not mean a full clock.",
        shot_ids,
    )


def cycle_count_changed(catalog: Catalog) -> Finding | None:
    bad = [
        f
        for f in catalog.figures
        if f.metric in RESIDUAL_METRICS and f.value is not None and abs(f.value) > CLOCK_ONLY_TOLERANCE
    ]
    if not bad:
        return None
    worst = max(bad, key=lambda f: abs(f.value))
    example = (
        "e.g. one-time work in the first shot of a process"
        if worst.value > 0
        else ("the warm shots did more work or stalled")
    )
    return Finding(
        "cycle_count_changed",
        f"Warm speed differs from cold × clock ratio by more than {CLOCK_ONLY_TOLERANCE:.0%} "
        f"(clock_only_tolerance; worst: {worst.value:+.1%} for {worst.input_figure_ids[0]}): more than the "
        f"clock changed between the cold and warm shots ({example}).",
        frozenset(s for f in bad for s in f.shot_ids),
        across="protocol",
    )


TELEMETRY_RULES = (
    sensor_not_readable,
    sensor_fallback,
    telemetry_gap,
    gpu_not_confirmed,
    few_telemetry_samples,
    power_reading_unreliable,
    energy_counter_uncertain,
    output_token_energy_unstable,
    prefill_token_energy_unstable,
    clock_dropped_thermal_normal,
    cycle_count_changed,
)
