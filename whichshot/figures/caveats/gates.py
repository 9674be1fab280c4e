"""Is a figure gated out, and why: the one rule the answer block, the plots, the report's tables and
the claim verdicts share. A speed-up whose cells carry task_not_done (the model did not do the task),
task_gate_not_checked (nobody knows whether it did), lossless_check_failed (the drafted output is
other text than the no-draft output) or lossless_not_checked (nobody compared) is not known to be the
task's speed-up; a prefill figure carrying prompt_cache_hit (the engine read the prompt from its
cache) is no prefill speed; a decode figure resting on a shot without drafting that decoded faster
than its cell's physical ceiling (shot_above_decode_ceiling) is no engine's speed: each is struck,
never shown or counted as a valid figure or a win.

The tables read a figure's caveat ids; the answer block, made before caveats are attached, asks
GateCheck, which runs the same gate rules and the same `touches` as `attach`: both agree by
construction."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from whichshot.figures.catalog import Catalog
from whichshot.figures.caveats.ceiling_rules import SHOT_ABOVE_CEILING, shot_above_decode_ceiling
from whichshot.figures.caveats.comparison_rules import (
    LOSSLESS_CHECK_FAILED,
    LOSSLESS_NOT_CHECKED,
    lossless_check_failed,
    lossless_not_checked,
)
from whichshot.figures.caveats.finding import ACROSS_COLUMNS, shot_values, touches
from whichshot.figures.caveats.run_rules import PROMPT_CACHE_HIT, prompt_cache_hit
from whichshot.figures.caveats.task_rules import (
    TASK_GATE_NOT_CHECKED,
    TASK_NOT_DONE,
    task_gate_not_checked,
    task_not_done,
)
from whichshot.figures.clock_figures import NOT_CHECKABLE_HERE
from whichshot.figures.figure import Figure
from whichshot.figures.workload_figures import SPEEDUP_METRIC
from whichshot.shots.axes import AXES

__all__ = ["GATES", "NOT_CHECKABLE_HERE", "STRUCK_MEANS", "Gate", "GateCheck", "gate_label", "gate_words",
           "gated_out", "gates_failed", "struck_by", "struck_legend"]  # fmt: skip


@dataclass(frozen=True)
class Gate:
    """Why a figure is gated out: the caveat that did it, a short label and the reason in words."""

    caveat_id: str
    label: str  # what a plot or a table cell says in place of the value ("gate failed", "lossy")
    reason: str
    # The metrics whose figures a table strikes for it (None: every figure carrying its caveat).
    strikes: frozenset[str] | None = None

    def words(self) -> str:
        return f"{self.label}: {self.reason}"


# A task or lossless gate strikes the speed-up it voids (the cell's own figures keep the caveat); the
# prompt-cache gate every figure carrying it (its caveat reaches prefill figures only).
_SPEEDUP = frozenset({SPEEDUP_METRIC})
GATES = (
    Gate(TASK_NOT_DONE, "gate failed", "task not done (its workload's task gate failed)", _SPEEDUP),
    Gate(TASK_GATE_NOT_CHECKED, "gate not checked", "the task gate could not be checked", _SPEEDUP),
    Gate(
        LOSSLESS_CHECK_FAILED,
        "lossy",
        "output not lossless (changed by drafting: it differs from the no-draft output other than at a "
        "near-tie of the target)",
        _SPEEDUP,
    ),
    Gate(
        LOSSLESS_NOT_CHECKED,
        "lossless not checked",
        "output never compared with the no-draft output",
        _SPEEDUP,
    ),  # fmt: skip
    Gate(PROMPT_CACHE_HIT, "cache hit", "prompt read from the engine's cache, not prefilled"),
    Gate(SHOT_ABOVE_CEILING, "above ceiling", "a shot decoded faster than the machine can without drafting"),
)
# The caveat rules behind GATES, in its order.
GATE_RULES = (task_not_done, task_gate_not_checked, lossless_check_failed, lossless_not_checked,
              prompt_cache_hit, shot_above_decode_ceiling)  # fmt: skip
# What a struck figure is, for a table's legend (HTML and Markdown alike), before the gates that struck.
STRUCK_MEANS = "not a valid figure, never a win"


def struck_legend(gates: Iterable[Gate]) -> str:
    """'not a valid figure, never a win: gate failed = task not done (...); lossy = ...' for the gates
    that struck a table's cells, in GATES order."""
    present = set(gates)
    return f"{STRUCK_MEANS}: " + "; ".join(f"{g.label} = {g.reason}" for g in GATES if g in present)


def gates_failed(caveat_ids: Iterable[str] | None) -> list[Gate]:
    """The gates a figure with these caveat ids failed, in GATES order (empty: it passed them)."""
    present = set(caveat_ids if caveat_ids is not None else ())
    return [gate for gate in GATES if gate.caveat_id in present]


def gated_out(figure: Mapping[str, Any] | None) -> list[Gate]:
    """The gates a figure row (figures.parquet row or report record) failed."""
    return gates_failed(figure.get("caveat_ids")) if figure is not None else []


def _strikes(gate: Gate, metric: str | None) -> bool:
    return gate.strikes is None or metric in gate.strikes


def struck_by(figure: Mapping[str, Any] | None) -> list[Gate]:
    """The gates for which a table strikes this figure row (a subset of gated_out's)."""
    if figure is None:
        return []
    return [gate for gate in gated_out(figure) if _strikes(gate, figure.get("metric"))]


def gate_label(gates: list[Gate]) -> str:
    """'gate failed', 'lossy', 'gate failed, lossy'; '' for none."""
    return ", ".join(gate.label for gate in gates)


def gate_words(gates: list[Gate]) -> str:
    """'gate failed: task not done (...)' for each failed gate, joined; '' for none."""
    return "; ".join(gate.words() for gate in gates)


class GateCheck:
    """The gates for which a table will strike a figure, before caveats are attached: the gate rules
    run once over the catalog, and a figure fails a gate where its finding touches it (finding.touches,
    as attach does) and the gate strikes its metric (as struck_by)."""

    def __init__(self, catalog: Catalog) -> None:
        found = (rule(catalog) for rule in GATE_RULES)
        self._findings = {finding.caveat_id: finding for finding in found if finding is not None}
        self._axes_of = shot_values(catalog.shots, [*AXES, *ACROSS_COLUMNS])

    def gates(self, figure: Figure) -> list[Gate]:
        return [gate for gate in GATES
                if gate.caveat_id in self._findings and _strikes(gate, figure.metric)
                and touches(self._findings[gate.caveat_id], figure, self._axes_of)]  # fmt: skip
