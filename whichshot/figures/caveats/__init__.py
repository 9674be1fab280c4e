"""Caveat rules (each a predicate over shots or cells) and the one way they reach figures."""

from whichshot.figures.caveats.comparison_rules import COMPARISON_RULES
from whichshot.figures.caveats.finding import Finding, attach
from whichshot.figures.caveats.run_rules import RUN_RULES
from whichshot.figures.caveats.telemetry_rules import TELEMETRY_RULES

RULES = (*RUN_RULES, *TELEMETRY_RULES, *COMPARISON_RULES)

__all__ = ["RULES", "Finding", "attach"]
