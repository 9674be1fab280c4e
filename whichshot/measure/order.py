"""The order the run measures its series in: the sides a cell compares alternate in time.

A cell's sides are its series that differ only in how they run (cold or warm, the rest and the
precondition before the shots, the series length, the compile cache, the speculative mode): what its
verdicts compare. Each repeat of the cell is a block holding one series of every side; odd blocks
run the sides in grid order, even blocks reversed, so two sides run A B B A A B ... (ABBA blocks)
and more sides A B C C B A .... A drift of the machine over the cell's minutes then falls on every
side alike, and no side runs all its processes in one stretch. Cells follow one another in grid
order, each cell's blocks together.

run_series' priority (workflow/rules/protocol.smk) makes Snakemake start the ready series in this
order; each shot records its series' place (order_fields), so a run shows the order it really ran in.
"""

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from whichshot.measure.grid import Job

# The fields a cell's sides differ in; every other field but the repeat names the cell.
SIDE_FIELDS = ("protocol", "rest_s", "precondition_s", "series_length", "compile_cache", "spec_mode")


@dataclass(frozen=True)
class Place:
    """A series' place in the run's order."""

    position: int  # 1-based, over every series of the run
    cell: str  # the cell whose sides it alternates with: the series label of the cell's first side
    block: int  # 1-based: the cell's blocks are its repeats, in order
    slot: int  # 1-based place of its side within the block


def side_of(job: Job) -> tuple[Any, ...]:
    return tuple(getattr(job, name) for name in SIDE_FIELDS)


def cell_of(job: Job) -> Job:
    """The job with its side and repeat blanked: equal for every series one cell compares."""
    return replace(job, repeat=0, **dict.fromkeys(SIDE_FIELDS))


def run_order(jobs: list[Job]) -> dict[str, Place]:
    """Each series' place (by job id): cells in grid order, each cell's blocks in repeat order, the
    sides of a block in grid order (odd blocks) or reversed (even blocks)."""
    cells: dict[Job, list[Job]] = {}
    for job in jobs:
        cells.setdefault(cell_of(job), []).append(job)
    order: dict[str, Place] = {}
    for members in cells.values():
        sides = list(dict.fromkeys(side_of(job) for job in members))
        label = members[0].series_label
        repeats = sorted({job.repeat for job in members})
        for block, repeat in enumerate(repeats, start=1):
            ranked = sides if block % 2 else sides[::-1]
            block_jobs = [job for job in members if job.repeat == repeat]
            in_block = sorted(block_jobs, key=lambda job: ranked.index(side_of(job)))
            for slot, job in enumerate(in_block, start=1):
                order[job.job_id] = Place(len(order) + 1, label, block, slot)
    return order


def priority(place: Place, total: int) -> int:
    """Snakemake's priority of the series (higher starts first among the ready ones): every series
    above every other job's 0, the first in the order highest."""
    return total - place.position + 1


def prepare_priority(total: int) -> int:
    """Snakemake's priority of a job that prepares some series (their prompts): above every series, so
    that no series is ready early because its preparation happened to run first."""
    return total + 1


def order_fields(place: Place | None) -> dict[str, Any]:
    """The shot columns that record its series' place (None: run outside a planned run, by hand)."""
    if place is None:
        return {f"order_{field.name}": None for field in fields(Place)}
    return {f"order_{name}": value for name, value in asdict(place).items()}
