"""Caveats about the probes of a verification step's cost: llama-bench's batch timing and the server's
verify probe (measure/verify_cost.py, measure/verify_probe.py), which the speed-up cost model rests on."""

from whichshot.figures.catalog import Catalog
from whichshot.figures.constants import VERIFY_PROBE_SPREAD_LIMIT
from whichshot.shots.caveat import Finding

# Why a probe did not run that is a choice of the config, or of the series, not a failure.
CHOSEN = ("bench.enabled is false", "bench.verify_probe.enabled is false", "the series drafts nothing")


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
        if why and why not in CHOSEN:
            missing[f"llama-server:results/bench/{run['job_id']}.json#verify_probe"] = why
    if not missing:
        return None
    return Finding(
        "verify_probe_not_measured",
        f"The server's verify probe gave no step times for {len(missing)} drafted series "
        f"({'; '.join(sorted(set(missing.values())))}): those cells have no predicted speed-up.",
        source_ids=frozenset(missing),
    )


PROBE_RULES = (verify_probe_unsteady, verify_probe_not_measured)
