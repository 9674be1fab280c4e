"""Is a figure gated out, and why: the one rule the plots, the speed-up tables and the claim verdicts
share. A figure carrying task_not_done (the model did not do the task) or lossless_check_failed (the
drafted output is other text than the no-draft output) is not the task's speed, so it is never shown
or counted as a win."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from whichshot.figures.caveats.comparison_rules import LOSSLESS_CHECK_FAILED
from whichshot.figures.caveats.task_rules import TASK_NOT_DONE
from whichshot.figures.clock_figures import NOT_CHECKABLE_HERE

__all__ = ["GATES", "NOT_CHECKABLE_HERE", "Gate", "gate_label", "gate_words", "gated_out", "gates_failed"]


@dataclass(frozen=True)
class Gate:
    """Why a figure is gated out: the caveat that did it, a short label and the reason in words."""

    caveat_id: str
    label: str  # what a plot or a table cell says in place of the value ("gate failed", "lossy")
    reason: str

    def words(self) -> str:
        return f"{self.label}: {self.reason}"


GATES = (
    Gate(TASK_NOT_DONE, "gate failed", "task not done (its workload's task gate failed)"),
    Gate(LOSSLESS_CHECK_FAILED, "lossy", "output not lossless (differs from the no-draft output)"),
)


def gates_failed(caveat_ids: Iterable[str] | None) -> list[Gate]:
    """The gates a figure with these caveat ids failed, in GATES order (empty: it passed them)."""
    present = set(caveat_ids if caveat_ids is not None else ())
    return [gate for gate in GATES if gate.caveat_id in present]


def gated_out(figure: Mapping[str, Any] | None) -> list[Gate]:
    """The gates a figure row (figures.parquet row or report record) failed."""
    return gates_failed(figure.get("caveat_ids")) if figure is not None else []


def gate_label(gates: list[Gate]) -> str:
    """'gate failed', 'lossy', 'gate failed, lossy'; '' for none."""
    return ", ".join(gate.label for gate in gates)


def gate_words(gates: list[Gate]) -> str:
    """'gate failed: task not done (...)' for each failed gate, joined; '' for none."""
    return "; ".join(gate.words() for gate in gates)
