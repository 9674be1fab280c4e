"""Caveats about the probes of a verification step's cost: llama-bench's batch timing and the server's
verify probe (measure/verify_cost.py, measure/verify_probe.py), which the speed-up cost model rests on."""

from whichshot.figures.catalog import Catalog
from whichshot.figures.constants import VERIFY_PROBE_SPREAD_LIMIT, busy_threshold_cores
from whichshot.figures.step_probe import kept_requests, probe_source
from whichshot.measure.verify_cost import DRAFTS_NOTHING
from whichshot.shots.caveat import Finding

# Why a probe did not run that is a choice of the config (bench.*), or of the series, not a failure.
CHOSEN = ("bench.", DRAFTS_NOTHING)


def verify_probe_unsteady(catalog: Catalog) -> Finding | None:
    """Step-cost probes whose timed repetitions spread more than VERIFY_PROBE_SPREAD_LIMIT (their
    spread figures: speedup_model_figures' verify_probe_spread and verify_cost_spread)."""
    spreads = [f for f in catalog.figures if f.aggregation == "largest_spread" and f.value is not None]
    unsteady = [f for f in spreads if f.value > VERIFY_PROBE_SPREAD_LIMIT]
    if not unsteady:
        return None
    worst = max(unsteady, key=lambda f: f.value)
    return Finding(
        "verify_probe_unsteady",
        f"In {len(unsteady)} drafted cell(s) a probe of a verification step's cost spread more than "
        f"x{VERIFY_PROBE_SPREAD_LIMIT} between its slowest and fastest timed repetition (worst "
        f"x{worst.value:.2f}, {worst.figure_id}): it timed the machine's moods as much as the step. The "
        "server's probe then feeds no prediction (the cost model says nothing there); llama-bench's batch "
        "ratio is the kernel alone beside it and feeds none anyway.",
        source_ids=frozenset(s for f in unsteady for s in f.source_ids),
    )


def verify_probe_not_measured(catalog: Catalog) -> Finding | None:
    """Drafted series whose server verify probe failed or could not run (not by the config's choice)."""
    missing = {}
    for run in catalog.bench_runs:
        probe = run.get("verify_probe")
        if not probe:
            continue  # a run from before the probe existed
        why = probe.get("error") or probe.get("not_run")
        if why and not why.startswith(CHOSEN):
            missing[probe_source(run["job_id"])] = why
    if not missing:
        return None
    return Finding(
        "verify_probe_not_measured",
        f"The server's verify probe gave no step times for {len(missing)} drafted series "
        f"({'; '.join(sorted(set(missing.values())))}): those cells have no predicted speed-up.",
        source_ids=frozenset(missing),
    )


def verify_probe_host_busy(catalog: Catalog) -> Finding | None:
    """Server verify probes with a kept request (a point's samples) during which other work exceeded
    the cores the engine left idle (busy_threshold_cores, as host_busy judges a shot)."""
    busy = {}
    for run in catalog.bench_runs:
        probe = run.get("verify_probe") or {}
        limit = busy_threshold_cores(probe.get("cpu_count"), probe.get("threads"))
        loads = [r.get("host_foreign_cores") for p in probe.get("points", []) for r in kept_requests(p)]
        worst = max((c for c in loads if c is not None), default=None)
        if worst is not None and worst > limit:
            busy[probe_source(run["job_id"])] = worst
    if not busy:
        return None
    return Finding(
        "verify_probe_host_busy",
        f"Other work ran on the machine during the server's verify probe of {len(busy)} drafted series "
        f"beyond the cores the engine left idle (worst {max(busy.values()):.2f} cores): its step times, and "
        "the predictions resting on them, may be slow for reasons outside the engine.",
        source_ids=frozenset(_point_sources(catalog, busy)),
    )


def _point_sources(catalog: Catalog, probes: dict[str, float]) -> set[str]:
    """The figures' source ids that name one of these probes' points (and the probes themselves)."""
    cited = {s for f in catalog.figures for s in f.source_ids}
    return {s for s in cited if s.startswith(tuple(probes))} | set(probes)


PROBE_RULES = (verify_probe_unsteady, verify_probe_not_measured, verify_probe_host_busy)
