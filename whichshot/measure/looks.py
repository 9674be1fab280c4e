"""Run until decided (protocol.until_decided), the plan: a protocol-grid cell gets its warm series in
planned looks, e.g. [10, 20, 40]: 10 series, 10 more, then 20 more, the next only while one of its
verdicts is open.

After each look a Snakemake checkpoint (decide_look, workflow/rules/aggregate.smk) reads the cell's
finished series and writes a decision (figures.look_decision): "decided", "continue", "last look" or
"seconds cap". The series of look k+1 are in the DAG only once look k's decision on disk says
"continue" (series_through walks the decisions), so an interrupted run resumes the sequence where it
stopped. Inside a look the cell's sides keep the run's interleaved order (measure.order: a look's
repeats are whole blocks).
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from whichshot.shots.axes import BASE_WORKLOAD

CONTINUE = "continue"


@dataclass(frozen=True)
class Looks:
    """The planned looks (a cell's series counts, increasing) and the cap on its measured seconds."""

    counts: tuple[int, ...]
    max_seconds: float | None = None

    def bounds(self, look: int) -> tuple[int, int]:
        """The repeats (1-based, inclusive) look `look` (1-based) adds."""
        return (self.counts[look - 2] + 1 if look > 1 else 1), self.counts[look - 1]

    def look_of(self, repeat: int) -> int:
        """The look (1-based) that runs repeat `repeat`."""
        return next(look for look, count in enumerate(self.counts, start=1) if repeat <= count)


def looks_of(protocol: dict[str, Any]) -> Looks | None:
    """The protocol's planned looks; None where until_decided is off (the fixed repeats run)."""
    until = protocol.get("until_decided") or {}
    if not until.get("enabled"):
        return None
    return Looks(tuple(until["looks"]), until.get("max_seconds"))


def grid_repeats(protocol: dict[str, Any]) -> int:
    """The protocol grid's repeats, the most it can run: the last look's count where looks are planned."""
    looks = looks_of(protocol)
    return protocol["repeats"] if looks is None else looks.counts[-1]


def in_looks(job: Any, protocol: dict[str, Any]) -> bool:
    """Whether the series runs in looks: a protocol-grid series where until_decided is on."""
    return looks_of(protocol) is not None and job.workload == BASE_WORKLOAD


def cells_in_looks(jobs: list[Any], cells: dict[str, str], protocol: dict[str, Any]) -> dict[str, list[Any]]:
    """The series that run in looks, by cell (`cells`: job id -> its cell, measure.order's Place.cell),
    in repeat order."""
    looked: dict[str, list[Any]] = {}
    for job in sorted(jobs, key=lambda job: job.repeat):
        if in_looks(job, protocol):
            looked.setdefault(cells[job.job_id], []).append(job)
    return looked


def series_through(cell_jobs: list[Any], looks: Looks, look: int) -> list[str]:
    """The job ids of a cell's series in looks 1..`look`."""
    last = looks.counts[look - 1]
    return [job.job_id for job in cell_jobs if job.repeat <= last]


def looks_run(looks: Looks, decision_of: Callable[[int], str | None]) -> int:
    """How many looks a cell runs as far as known: look 1, and look k+1 while look k's decision
    (decision_of(k); None: not made yet) says "continue"."""
    look = 1
    while look < len(looks.counts) and decision_of(look) == CONTINUE:
        look += 1
    return look
