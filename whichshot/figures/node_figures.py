"""Nodes side by side, where a run compares nodes (placement.compare_nodes: the node is an axis): the
same cell on each node, set against the first node of placement.nodes. The ratio is of whole
machines: GPU, driver, power limit, CPU and their load all differ with the node (the nodes_compared
caveat says so on every such figure)."""

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.side_figures import Side, side_figures


def node_figures(catalog: Catalog) -> list[figure.Figure]:
    return side_figures(catalog, NODES)


NODES = Side("node_requested", "node", "xnode", node_figures)
