"""Is a figure gated out, and why: the one rule the plots, the report's tables and the claim verdicts
share. A figure carrying task_not_done (the model did not do the task) or lossless_check_failed (the
drafted output is other text than the no-draft output) is not the task's speed, and a prefill figure
carrying prompt_cache_hit (the engine read the prompt from its cache) is no prefill speed: each is
struck, never shown or counted as a valid figure."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from whichshot.figures.caveats.comparison_rules import LOSSLESS_CHECK_FAILED
from whichshot.figures.caveats.run_rules import PROMPT_CACHE_HIT
from whichshot.figures.caveats.task_rules import TASK_NOT_DONE
from whichshot.figures.clock_figures import NOT_CHECKABLE_HERE
from whichshot.figures.workload_figures import SPEEDUP_METRIC

__all__ = ["GATES", "NOT_CHECKABLE_HERE", "Gate", "gate_label", "gate_words", "gated_out", "gates_failed",
           "struck_by"]  # fmt: skip


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
    Gate(LOSSLESS_CHECK_FAILED, "lossy", "output not lossless (differs from the no-draft output)", _SPEEDUP),
    Gate(PROMPT_CACHE_HIT, "cache hit", "prompt read from the engine's cache, not prefilled"),
)


def gates_failed(caveat_ids: Iterable[str] | None) -> list[Gate]:
    """The gates a figure with these caveat ids failed, in GATES order (empty: it passed them)."""
    present = set(caveat_ids if caveat_ids is not None else ())
    return [gate for gate in GATES if gate.caveat_id in present]


def gated_out(figure: Mapping[str, Any] | None) -> list[Gate]:
    """The gates a figure row (figures.parquet row or report record) failed."""
    return gates_failed(figure.get("caveat_ids")) if figure is not None else []


def struck_by(figure: Mapping[str, Any] | None) -> list[Gate]:
    """The gates for which a table strikes this figure row (a subset of gated_out's)."""
    if figure is None:
        return []
    return [
        gate for gate in gated_out(figure) if gate.strikes is None or figure.get("metric") in gate.strikes
    ]


def gate_label(gates: list[Gate]) -> str:
    """'gate failed', 'lossy', 'gate failed, lossy'; '' for none."""
    return ", ".join(gate.label for gate in gates)


def gate_words(gates: list[Gate]) -> str:
    """'gate failed: task not done (...)' for each failed gate, joined; '' for none."""
    return "; ".join(gate.words() for gate in gates)
