"""Caveats: rules that fire from the data, each with an id, a sentence and the figures it touches."""

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from whichshot.crosscheck import BENCH_TOLERANCE, CLIENT_ENGINE_TOLERANCE
from whichshot.engine_caveats import ENGINE_RULES
from whichshot.figures import Figure
from whichshot.host_load import BUSY_CORES
from whichshot.power import (
    CLOCK_DROP_FRACTION,
    CLOCK_DROP_METRIC,
    CLOCK_ONLY_TOLERANCE,
    COLD_WARM_METRICS,
    ENERGY_METRIC,
    POWER_MEDIAN_METRIC,
    RESIDUAL_METRICS,
    throttle_reasons,
)
from whichshot.stats import outlier_flags


@dataclass
class Caveat:
    """A warning attached to figures because the data made it true."""

    caveat_id: str
    sentence: str
    figure_ids: list[str] = field(default_factory=list)

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Evidence:
    """What the caveat rules look at."""

    shots: pd.DataFrame
    figures: list[Figure]
    unreadable_sensors: list[str] = field(default_factory=list)


def _ids(figures: list[Figure], test: Callable[[Figure], bool] = lambda f: True) -> list[str]:
    return [f.figure_id for f in figures if test(f)]


def single_machine(ev: Evidence) -> Caveat | None:
    hosts = ev.shots["hostname"].nunique()
    models = ev.shots["model"].nunique()
    if hosts > 1:
        return None
    return Caveat(
        "single_machine",
        f"All figures come from one machine ({ev.shots['hostname'].iloc[0]}) and "
        f"{models} model(s); they say nothing about other hardware.",
        [],
    )


def one_repeat(ev: Evidence) -> Caveat | None:
    if ev.shots["repeat"].max() > 1:
        return None
    return Caveat(
        "one_repeat",
        "Each series ran once (repeats = 1): run-to-run variation is not measured.",
        [],
    )


def sensors_unreadable(ev: Evidence) -> Caveat | None:
    if not ev.unreadable_sensors:
        return None
    return Caveat(
        "sensor_not_readable",
        "Not measured on this machine (no value is shown for them): "
        + ", ".join(sorted(set(ev.unreadable_sensors)))
        + ".",
        [],
    )


def sensor_fallback(ev: Evidence) -> Caveat | None:
    notes = sorted({n for joined in ev.shots["telemetry_fallbacks"].dropna() for n in joined.split("|")})
    if not notes:
        return None
    return Caveat("sensor_fallback", "Read from a weaker source: " + "; ".join(notes) + ".", [])


def telemetry_gap(ev: Evidence) -> Caveat | None:
    if "telemetry_gaps" not in ev.shots:
        return None
    gapped = ev.shots[ev.shots["telemetry_gaps"].notna()]
    if gapped.empty:
        return None
    notes = sorted({n for joined in gapped["telemetry_gaps"] for n in joined.split("|") if n})
    return Caveat(
        "telemetry_gap",
        f"A sensor stopped answering mid-run: {len(gapped)} shot(s) have no reading from it from the "
        "failure on (not measured, never filled in); the shots themselves ran and count. "
        + "; ".join(notes[:4])
        + ".",
        [],
    )


def client_engine_disagree(ev: Evidence) -> Caveat | None:
    bad = [f for f in ev.figures if f.metric == "client_vs_engine_decode_ratio"
           and f.value is not None and abs(f.value - 1) > CLIENT_ENGINE_TOLERANCE]  # fmt: skip
    if not bad:
        return None
    worst = max(bad, key=lambda f: abs(f.value - 1))
    # The headline decode figures of the same engine and model carry the caveat too.
    pairs = {(f.engine, f.model) for f in bad}
    timed = _ids(ev.figures, lambda f: (f.engine, f.model) in pairs
                 and f.metric in ("decode_tok_s", "engine_decode_tok_s"))  # fmt: skip
    return Caveat(
        "client_engine_disagree",
        f"Client-side and engine-reported decode speed differ by more than "
        f"{CLIENT_ENGINE_TOLERANCE:.0%} (worst: {worst.value - 1:+.1%} for {worst.model}).",
        [f.figure_id for f in bad] + timed,
    )


def bench_disagree(ev: Evidence) -> Caveat | None:
    bad = [f for f in ev.figures if f.metric == "prefill_vs_llama_bench_ratio"
           and f.value is not None and abs(f.value - 1) > BENCH_TOLERANCE]  # fmt: skip
    if not bad:
        return None
    return Caveat(
        "bench_disagree",
        f"Our prefill speed and llama-bench's pp differ by more than {BENCH_TOLERANCE:.0%} "
        "(llama-bench times the prefill alone, without HTTP, sampling or our shot position).",
        [f.figure_id for f in bad],
    )


def other_tool(ev: Evidence) -> Caveat | None:
    rival = _ids(ev.figures, lambda f: f.timed_by == "llama-bench")
    if not rival:
        return None
    return Caveat(
        "rival_tool_figure",
        "llama-bench figures come from another tool with its own protocol (warm-up run, mean "
        "of repetitions): compare them with our warm figures, never with a cold shot.",
        rival,
    )


def prompt_cache_used(ev: Evidence) -> Caveat | None:
    cached = ev.shots[ev.shots["engine_cached_tokens"].fillna(0) > 0]
    if cached.empty:
        return None
    return Caveat(
        "prompt_cache_hit",
        f"{len(cached)} shot(s) reused cached prompt tokens: their prefill is not a full prefill.",
        [],
    )


def outliers_present(ev: Evidence) -> Caveat | None:
    flagged = []
    ok = ev.shots[ev.shots["status"] == "ok"]
    for _job, series in ok.groupby("job_id"):
        values = series["decode_tok_s"].dropna().tolist()
        if any(outlier_flags(values)):
            flagged.append(_job)
    if not flagged:
        return None
    return Caveat(
        "outliers_present",
        f"{len(flagged)} series contain decode-speed outliers (|robust z| > 3.5 on the median "
        "absolute deviation); medians are used, but look at the per-shot plot.",
        [],
    )


def host_busy(ev: Evidence) -> Caveat | None:
    if "host_foreign_cores" not in ev.shots:
        return None
    busy = ev.shots[(ev.shots["status"] == "ok") & (ev.shots["host_foreign_cores"] > BUSY_CORES)]
    if busy.empty:
        return None
    worst = busy.loc[busy["host_foreign_cores"].idxmax()]
    shot_ids = set(busy["shot_id"])
    return Caveat(
        "host_busy",
        f"Other work ran on the machine during {len(busy)} shot(s): on average more than "
        f"{BUSY_CORES:g} cores beyond the engine and the measuring process (worst "
        f"{worst['host_foreign_cores']:.2f} cores in {worst['shot_id']}); their speeds may be low "
        "for reasons outside the engine (column host_foreign_cores).",
        _ids(ev.figures, lambda f: bool(shot_ids.intersection(f.shot_ids))),
    )


def failed_shots(ev: Evidence) -> Caveat | None:
    failed = ev.shots[ev.shots["status"] != "ok"]
    if failed.empty:
        return None
    return Caveat(
        "failed_shots",
        f"{len(failed)} shot(s) failed and are excluded from every figure: "
        + "; ".join(sorted(set(failed["error"].astype(str)))[:3]),
        [],
    )


def context_reduced(ev: Evidence) -> Caveat | None:
    shots = ev.shots.dropna(subset=["context_tokens_engine"])
    reduced = shots[shots["context_tokens_engine"] < shots["context_tokens_requested"]]
    if reduced.empty:
        return None
    row = reduced.iloc[0]
    shot_ids = set(reduced["shot_id"])
    return Caveat(
        "context_reduced",
        f"The engine chose a smaller context window than asked in {len(reduced)} shot(s) "
        f"(e.g. {int(row['context_tokens_engine'])} < {int(row['context_tokens_requested'])}).",
        _ids(ev.figures, lambda f: bool(shot_ids.intersection(f.shot_ids))),
    )


def clock_dropped_thermal_normal(ev: Evidence) -> Caveat | None:
    drops = [f for f in ev.figures if f.metric == CLOCK_DROP_METRIC and f.value]
    if not drops:
        return None
    shot_ids = {i for f in drops for i in f.shot_ids}
    reasons = throttle_reasons(ev.shots[ev.shots["shot_id"].isin(shot_ids)])
    named = ", ".join(reasons) if reasons else "no clock-event reason at all"
    cells = {f.series_label for f in drops}
    return Caveat(
        "clock_dropped_thermal_normal",
        f"In {len(shot_ids)} shot(s) the GPU SM clock fell more than {CLOCK_DROP_FRACTION:.0%} below the "
        f"best clock seen for the same engine and model while no thermal slowdown was reported (reasons "
        f"set: {named}): a normal thermal state does not mean a full clock.",
        _ids(ev.figures, lambda f: f.series_label in cells),
    )


def cycle_count_changed(ev: Evidence) -> Caveat | None:
    bad = [f for f in ev.figures if f.metric in RESIDUAL_METRICS
           and f.value is not None and abs(f.value) > CLOCK_ONLY_TOLERANCE]  # fmt: skip
    if not bad:
        return None
    worst = max(bad, key=lambda f: abs(f.value))
    example = (
        "e.g. one-time work in the first shot of a process"
        if worst.value > 0
        else "the warm shots did more work or stalled"
    )
    return Caveat(
        "cycle_count_changed",
        f"Warm speed differs from cold × clock ratio by more than {CLOCK_ONLY_TOLERANCE:.0%} "
        f"(worst: {worst.value:+.1%} for {worst.metric.removesuffix('_clock_residual')} in "
        f"{worst.series_label}): more than the clock changed between the cold and warm shots ({example}).",
        [f.figure_id for f in bad],
    )


def power_reading_unreliable(ev: Evidence) -> Caveat | None:
    if "gpu_power_reliable" not in ev.shots:
        return None
    ok = ev.shots[ev.shots["status"] == "ok"]
    unreliable = ok[ok["gpu_power_reliable"].map(lambda v: v is not None and not pd.isna(v) and not bool(v))]
    if unreliable.empty:
        return None
    cells = set(unreliable["series_label"])
    return Caveat(
        "power_reading_unreliable",
        f"{len(unreliable)} shot(s) were shorter than NVML's trailing power average: their power "
        "medians mostly describe what ran before them and are left out of every power figure; "
        "energy comes from the energy-counter delta instead.",
        _ids(
            ev.figures, lambda f: f.series_label in cells and f.metric in {POWER_MEDIAN_METRIC, ENERGY_METRIC}
        ),
    )


def cold_vs_warm_compared(ev: Evidence) -> Caveat | None:
    compared = _ids(ev.figures, lambda f: f.metric in COLD_WARM_METRICS)
    if not compared:
        return None
    return Caveat(
        "cold_vs_warm_compared",
        "Clock-ratio and warm/cold figures set cold shots (shot 1 of fresh processes) against warm "
        "ones (the warm rule's shots of a running process): two protocols, compared on purpose; "
        "never quote a number of one as the other.",
        compared,
    )


def synthetic_text(ev: Evidence) -> Caveat | None:
    if not (ev.shots["text_kind"] == "synthetic").any():
        return None
    touched = _ids(ev.figures, lambda f: "-synthetic." in f.series_label)
    return Caveat(
        "synthetic_text_in_use",
        "Some figures come from synthetic filler text, which drafts far better than real text "
        "(seed 002: ~80 % acceptance on filler vs 48.8 % on real requests); each row says which text.",
        touched,
    )


def lossless_failed(ev: Evidence) -> Caveat | None:
    bad = [f for f in ev.figures if f.metric == "lossless_share" and f.value is not None and f.value < 1]
    if not bad:
        return None
    return Caveat(
        "lossless_check_failed",
        "With drafting on, greedy output differed from the no-draft output: "
        + "; ".join(f"{f.series_label} ({f.note})" for f in bad[:4])
        + ". Drafting is not lossless here; its speed-up is not a free lunch.",
        [f.figure_id for f in bad],
    )


def acceptance_length_absent(ev: Evidence) -> Caveat | None:
    with_length = {f.series_label for f in ev.figures if f.metric == "draft_mean_len"}
    rates = _ids(ev.figures, lambda f: f.metric == "acceptance_rate" and f.series_label not in with_length)
    if not rates:
        return None
    return Caveat(
        "acceptance_length_not_derivable",
        "For these cells the engine reported drafted and accepted token counts but not the mean "
        "accepted length per verification step, so it is not shown (never estimated).",
        rates,
    )


RULES = (
    single_machine,
    one_repeat,
    sensors_unreadable,
    sensor_fallback,
    telemetry_gap,
    client_engine_disagree,
    bench_disagree,
    other_tool,
    prompt_cache_used,
    outliers_present,
    host_busy,
    failed_shots,
    context_reduced,
    clock_dropped_thermal_normal,
    cycle_count_changed,
    power_reading_unreliable,
    cold_vs_warm_compared,
    synthetic_text,
    lossless_failed,
    acceptance_length_absent,
    *ENGINE_RULES,  # cross-engine comparisons and server counters: engine_caveats.py
)


def fire_caveats(evidence: Evidence) -> list[Caveat]:
    """Every caveat whose rule fires on this data; attach their ids to the figures they touch."""
    fired = [c for rule in RULES if (c := rule(evidence)) is not None]
    by_id = {f.figure_id: f for f in evidence.figures}
    for caveat in fired:
        for figure_id in caveat.figure_ids:
            by_id[figure_id].caveat_ids.append(caveat.caveat_id)
    return fired
