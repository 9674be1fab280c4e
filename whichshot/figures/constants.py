"""The constants our judgments rest on (tolerances, thresholds). Each is written once, here or in
the module that measures with it, and reported as an assumed figure, so a plot or a caveat that
uses one reads it from figures.parquet like any other number."""

from dataclasses import dataclass
from typing import Any

from whichshot.figures import figure
from whichshot.figures.statistic import ROBUST_Z_THRESHOLD
from whichshot.measure.host_load import (  # noqa: F401 (the host_busy threshold: the caveat rules read it here)
    BUSY_CORES,
    BUSY_HARNESS_CORES,
    BUSY_MARGIN_CORES,
    busy_threshold_cores,
)
from whichshot.measure.settle import VERIFY_PROBE_SPREAD_LIMIT  # the probe repeats until under it
from whichshot.shots.checks import POWER_COUNTER_AGREEMENT
from whichshot.shots.task_gates import EXPLAIN_REPETITION_LIMIT, RECALL_NEAR_EXACT
from whichshot.tables import record_schema

# The seed's check: warm ≈ cold × (f_warm / f_cold) within 1-2 % means only the clock changed.
CLOCK_ONLY_TOLERANCE = 0.02
# A shot's minimum SM clock this far below the engine+model's best median counts as a drop.
CLOCK_DROP_FRACTION = 0.03
# Our client's decode speed and the engine's own may differ by this much before it is a caveat.
CLIENT_ENGINE_TOLERANCE = 0.01
# Our prefill (engine-timed, warm) and llama-bench's pp may differ by this much.
BENCH_TOLERANCE = 0.03
# NVML's energy counter moved in steps of about this much on the H200 (tools/bench_sampler.py):
# a shot's energy is uncertain by up to one step at each end.
ENERGY_COUNTER_STEP_S = 0.1
# Energy of a shot is flagged when that uncertainty (2 steps / shot seconds) exceeds this share.
ENERGY_UNCERTAINTY_LIMIT = 0.2
# An energy-per-token figure (energy_figures.energy_verdict) is stable only where the windows it sums
# hold at least this many counter updates: each window's energy is off by up to one counter step at
# either end, and these errors differ in sign from window to window, so over 20 updates seen they
# average to a few percent of the total; NVML's counter is read every ENERGY_INTERVAL_S (1 s), so
# this is about 20 s of the part of the shot measured.
MIN_ENERGY_COUNTER_UPDATES = 20
# The counter is not read at the first token: it is interpolated between the readings around it,
# which misplaces at most (seconds to the nearer reading) x (power swing there). Summed over the
# windows, those seconds may be this share of the windows' time (the swing is at most the power).
ENERGY_SPLIT_LIMIT = 0.05
# The shots of an energy figure ran at one operating point when their SM clock medians spread
# (max - min over median) at most this: energy per token follows clock and voltage.
ENERGY_CLOCK_SPREAD = 0.03
# A telemetry summary of fewer samples than this inside the shot rests on too little to trust.
MIN_TELEMETRY_SAMPLES = 2
# A drafted speed-up "comes mostly from self-repetition" when the cell's output repeats its own
# earlier spans more than this share, and more than it copies from the prompt.
SELF_REPETITION_DOMINANT = 0.3
# A drafter whose state carries across requests (n-gram) learnt from earlier ones when its warm
# acceptance exceeds a process's first request's by more than this (points of accepted / drafted).
DRAFTER_WARM_ACCEPTANCE_MARGIN = 0.05


@dataclass(frozen=True)
class Constant:
    metric: str
    value: float
    unit: str
    meaning: str


CONSTANTS = (
    Constant(
        "recall_near_exact",
        RECALL_NEAR_EXACT,
        "fraction",
        "verbatim_recall's gate passes when this share of the document's words come back in order",
    ),
    Constant(
        "explain_repetition_limit",
        EXPLAIN_REPETITION_LIMIT,
        "fraction",
        "explain's gate fails when more of its output tokens repeat its own earlier 8-token spans",
    ),
    Constant(
        "self_repetition_dominant",
        SELF_REPETITION_DOMINANT,
        "fraction",
        "a drafted speed-up whose output repeats itself more than this (and more than it copies its "
        "input) fires speedup_from_self_repetition",
    ),
    Constant(
        "drafter_warm_acceptance_margin",
        DRAFTER_WARM_ACCEPTANCE_MARGIN,
        "fraction",
        "warm acceptance (accepted / drafted) more than this above a process's first request's fires "
        "drafter_learnt_across_requests",
    ),
    Constant(
        "verify_probe_spread_limit",
        VERIFY_PROBE_SPREAD_LIMIT,
        "ratio",
        "a step-cost probe whose slowest timed repetition exceeds its fastest by more than this factor feeds "
        "no prediction and fires verify_probe_unsteady",
    ),
    Constant(
        "clock_only_tolerance",
        CLOCK_ONLY_TOLERANCE,
        "fraction",
        "measured warm within this of cold × clock ratio: only the clock changed",
    ),
    Constant(
        "clock_drop_fraction",
        CLOCK_DROP_FRACTION,
        "fraction",
        "a shot's minimum SM clock this far below the best median seen counts as a clock drop",
    ),
    Constant(
        "client_engine_tolerance",
        CLIENT_ENGINE_TOLERANCE,
        "fraction",
        "client and engine decode speed may differ by this before client_engine_disagree fires",
    ),
    Constant(
        "bench_tolerance",
        BENCH_TOLERANCE,
        "fraction",
        "our warm engine-timed speed and llama-bench's may differ by this before bench_disagree fires",
    ),
    Constant(
        "outlier_robust_z",
        ROBUST_Z_THRESHOLD,
        "z",
        "|robust z| (0.6745 (x - median) / MAD, within a series of 5+ shots) above this is an outlier",
    ),
    Constant(
        "host_busy_margin_cores",
        BUSY_MARGIN_CORES,
        "cores",
        "other work on the host (average over a shot) above the cores the engine leaves idle (logical cores "
        "- engine threads - host_busy_harness_cores) by more than this fires host_busy",
    ),
    Constant(
        "host_busy_harness_cores",
        BUSY_HARNESS_CORES,
        "cores",
        "cores the harness (client and telemetry) takes from those the engine leaves idle, in host_busy",
    ),
    Constant(
        "host_busy_cores",
        BUSY_CORES,
        "cores",
        "other work on the host above this (average over a shot) fires host_busy where the shot records no "
        "core count or engine threads (older rows)",
    ),
    Constant(
        "power_counter_agreement",
        POWER_COUNTER_AGREEMENT,
        "fraction",
        "a shot's NVML power median is reliable when within this of the energy counter's mean power",
    ),
    Constant(
        "energy_counter_step_s",
        ENERGY_COUNTER_STEP_S,
        "s",
        "update step of NVML's energy counter (seen on the H200)",
    ),
    Constant(
        "energy_uncertainty_limit",
        ENERGY_UNCERTAINTY_LIMIT,
        "fraction",
        "a shot's energy is flagged when 2 counter steps / shot seconds exceed this",
    ),
    Constant(
        "min_energy_counter_updates",
        MIN_ENERGY_COUNTER_UPDATES,
        "updates",
        "an energy-per-token figure is stable only where its windows hold at least this many counter updates",
    ),
    Constant(
        "energy_split_limit",
        ENERGY_SPLIT_LIMIT,
        "fraction",
        "the first token may lie this share of the windows' time from a counter reading (the split is "
        "interpolated there) in a stable energy-per-token figure",
    ),
    Constant(
        "energy_clock_spread",
        ENERGY_CLOCK_SPREAD,
        "fraction",
        "the SM clock medians of a stable energy-per-token figure's shots spread at most this",
    ),
    Constant(
        "min_telemetry_samples",
        MIN_TELEMETRY_SAMPLES,
        "samples",
        "a shot's telemetry summary rests on at least this many samples inside the shot",
    ),
)


def config_default(section: str, key: str) -> Any:
    """A config key's default, as the config schema states it (the one place it is written)."""
    return record_schema("config")["properties"][section]["properties"][key]["default"]


# The margin of "same within ±m" where a run does not pass its own (protocol.verdict_margin).
VERDICT_MARGIN = config_default("protocol", "verdict_margin")


def constant_figures(warm_fraction: float, verdict_margin: float) -> list[figure.Figure]:
    """Every constant as an assumed figure (the warm fraction and the verdict margin are the config's)."""
    rows = [
        *CONSTANTS,
        Constant(
            "warm_fraction",
            warm_fraction,
            "fraction",
            "the warm statistic uses this last share of each run (protocol.warm_fraction)",
        ),
        Constant(
            "verdict_margin",
            verdict_margin,
            "fraction",
            "comparisons within this fraction are the same for practical purposes (protocol.verdict_margin)",
        ),
    ]
    return [
        figure.given(
            c.metric,
            c.value,
            c.unit,
            "constant",
            f"constant:{c.metric}",
            cell={},
            formula=c.meaning,
            computed_by=constant_figures,
            timed_by="nobody: a constant we chose",
            which_shot="no shot: a constant",
        )
        for c in rows
    ]
