"""The run's order of series (whichshot.measure.order): the sides a cell compares alternate in time,
in ABBA blocks over the cell's repeats, in the default config and in one with more sides."""

from collections import defaultdict
from pathlib import Path

from whichshot.config import config_as_run
from whichshot.measure.grid import all_jobs
from whichshot.measure.order import cell_of, priority, run_order, side_of

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "config" / "config.yaml"


def _sides_in_time(config: dict) -> dict[str, list[tuple]]:
    """Each cell's sides, one per series, in the order the run starts them."""
    jobs = {job.job_id: job for job in all_jobs(config)}
    order = run_order(list(jobs.values()))
    cells: dict[str, list[tuple]] = defaultdict(list)
    for job_id in sorted(order, key=lambda j: order[j].position):
        cells[order[job_id].cell].append(side_of(jobs[job_id]))
    return cells


def _never_one_side_in_a_block(sides: list[tuple], count: int) -> bool:
    """Every window of `count` consecutive series holds every side once (the blocks are whole),
    and the block after reverses the one before (A B | B A: no side runs twice apart from the seam)."""
    blocks = [sides[i : i + count] for i in range(0, len(sides), count)]
    whole = all(len(set(block)) == count for block in blocks)
    reversed_next = all(later == earlier[::-1] for earlier, later in zip(blocks, blocks[1:], strict=False))
    return whole and reversed_next


def test_the_default_plan_alternates_every_cells_sides():
    config = config_as_run(DEFAULT, DEFAULT)
    cells = _sides_in_time(config)
    compared = {cell: sides for cell, sides in cells.items() if len(set(sides)) > 1}
    workloads, lengths = config["workloads"]["names"], config["prompts"]["lengths"]
    # Each workload compares none with ngram; the grid's cold/warm pairs lie inside each process (its
    # shot 1 against its warm shots), so a grid cell has one side: its warm series.
    assert len(compared) == len(workloads) and len(cells) == len(workloads) + len(lengths)
    for cell, sides in compared.items():
        count = len(set(sides))
        assert count == 2, cell
        assert len(sides) >= 4, cell  # at least two blocks: A B B A
        assert _never_one_side_in_a_block(sides, count), (cell, sides)
        first = sides[0]
        assert sides[:4] == [first, sides[1], sides[1], first] and sides[1] != first  # A B B A


def test_cells_run_together_and_positions_cover_the_run():
    config = config_as_run(DEFAULT, DEFAULT)
    jobs = all_jobs(config)
    order = run_order(jobs)
    assert sorted(p.position for p in order.values()) == list(range(1, len(jobs) + 1))
    by_position = sorted(jobs, key=lambda job: order[job.job_id].position)
    cells = [cell_of(job) for job in by_position]
    # a cell's series are consecutive: its blocks are not spread among other cells'
    assert len([c for i, c in enumerate(cells) if i == 0 or c != cells[i - 1]]) == len(set(cells))
    ranks = [priority(order[job.job_id], len(order)) for job in by_position]
    assert ranks == sorted(ranks, reverse=True) and min(ranks) >= 1  # above every other rule's 0


def test_three_sides_reverse_block_by_block():
    config = config_as_run(DEFAULT, DEFAULT)
    config["protocol"]["rests_s"] = [0, 3]  # cold, warm rest 0, warm rest 3
    config["protocol"]["cold_processes"] = 1
    config["protocol"]["repeats"] = 3
    for cell, sides in _sides_in_time(config).items():
        if sides and sides[0][0] in ("cold", "warm") and len(set(sides)) == 3:
            a, b, c = sides[:3]
            assert sides == [a, b, c, c, b, a, a, b, c], cell
            break
    else:
        raise AssertionError("no cell of three sides")
