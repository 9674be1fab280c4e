"""Which node each measurement series runs on, on a cluster of several.

A figure compares series (cold against warm, a chunk size against the largest, drafting against
none); measured on two nodes, it would compare the nodes too. Series that share the values of the
configured `placement.by` axes form a placement group, and each group is pinned to one node of
`placement.nodes`, round robin in grid order. Slurm does the rest: every measurement job asks for
its node exclusively (`--exclusive`), so one node never runs two measurements, or anything else,
at once, while different nodes measure side by side. Nothing here waits or schedules.

A run that compares nodes (placement.compare_nodes) runs every series on each node instead: the
node is then a grid axis (whichshot.measure.grid.on_nodes), and each series goes to its own.
"""

from collections.abc import Iterable
from typing import Any

from whichshot.errors import WhichshotError
from whichshot.measure.grid import Job

EXCLUSIVE = "--exclusive"


def group_key(job: Job, by: Iterable[str]) -> tuple[Any, ...]:
    """The placement group of a series: its values on the `by` axes."""
    return tuple(getattr(job, axis) for axis in by)


def nodes_of(jobs: Iterable[Job], placement: dict[str, Any]) -> dict[str, str | None]:
    """Each job's node: its own in a node comparison, else its placement group's, round robin over
    `nodes` in the order groups first appear; None for every job where no nodes are configured."""
    nodes, by = placement["nodes"], placement["by"]  # the schema's defaults are filled in
    node_of_group: dict[tuple[Any, ...], str] = {}
    placed = {}
    for job in jobs:
        if job.node_requested is not None:
            placed[job.job_id] = job.node_requested
            continue
        if not nodes:
            placed[job.job_id] = None
            continue
        key = group_key(job, by)
        if key not in node_of_group:
            node_of_group[key] = nodes[len(node_of_group) % len(nodes)]
        placed[job.job_id] = node_of_group[key]
    return placed


def probe_names(placement: dict[str, Any]) -> list[str]:
    """The hardware probes a run takes (results/hardware/<name>.json): one per placement node, each
    read on its node, else one on whatever machine measures."""
    return [f"{_PROBE}-{node}" for node in placement["nodes"]] or [_PROBE]


def probe_node(name: str) -> str | None:
    """The node a probe of probe_names reads (None: any)."""
    return name.removeprefix(f"{_PROBE}-") if name != _PROBE else None


_PROBE = "probe"


def slurm_extra(node: str | None) -> str:
    """sbatch options of a measurement job: the node to itself, and which node where pinned."""
    return EXCLUSIVE if node is None else f"{EXCLUSIVE} --nodelist={node}"


def check_on_its_node(job: Job, slurm_node: str | None, hostname: str) -> None:
    """A series of a node comparison runs on its node or not at all: its shots would be filed under
    a node that never ran them."""
    if job.node_requested is None or slurm_node == job.node_requested:
        return
    where = f"Slurm node {slurm_node}" if slurm_node else f"{hostname}, outside Slurm"
    raise WhichshotError(
        f"series {job.job_id} belongs to node {job.node_requested} of a node comparison "
        "(placement.compare_nodes) "
        f"but runs on {where}; run the comparison through the Slurm profile (docs/slurm.md)"
    )
