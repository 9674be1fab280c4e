"""Caveat rules (each a predicate over shots or cells) and the one way they reach figures. Rules
about one engine kind live in its module (its caveat_rules, over the shots alone)."""

from collections.abc import Callable

from whichshot.engine import engine_kinds, load_engine
from whichshot.figures.catalog import Catalog
from whichshot.figures.caveats.ceiling_rules import CEILING_RULES
from whichshot.figures.caveats.comparison_rules import COMPARISON_RULES
from whichshot.figures.caveats.divergence_rules import DIVERGENCE_RULES
from whichshot.figures.caveats.drafter_rules import DRAFTER_RULES
from whichshot.figures.caveats.finding import attach
from whichshot.figures.caveats.probe_rules import PROBE_RULES
from whichshot.figures.caveats.run_rules import RUN_RULES
from whichshot.figures.caveats.stream_rules import STREAM_RULES
from whichshot.figures.caveats.task_rules import TASK_RULES
from whichshot.figures.caveats.telemetry_rules import TELEMETRY_RULES
from whichshot.figures.caveats.trace_rules import TRACE_RULES
from whichshot.shots.caveat import Finding, ShotsRule


def rules() -> tuple:
    """Every caveat rule: the run's, telemetry's, comparisons', divergences', tasks', traces', streams',
    drafters', ceilings', step-cost probes', then each engine kind's own."""
    engine_rules = tuple(
        _over_shots(rule) for kind in engine_kinds() for rule in load_engine(kind).caveat_rules
    )
    return (*RUN_RULES, *TELEMETRY_RULES, *COMPARISON_RULES, *DIVERGENCE_RULES, *TASK_RULES, *TRACE_RULES,
            *STREAM_RULES, *DRAFTER_RULES, *CEILING_RULES, *PROBE_RULES, *engine_rules)  # fmt: skip


def _over_shots(rule: ShotsRule) -> Callable[[Catalog], Finding | None]:
    """An engine kind's rule (it reads the shots alone) as a rule over the catalog."""
    return lambda catalog: rule(catalog.shots)


__all__ = ["Finding", "attach", "rules"]
