"""Engines side by side: the same cell (every axis but the engine) on each engine of the run, set
against the run's first engine (config order): speed ratios (same mode) and the share of shots whose
output tokens are the same (whichshot.figures.side_figures)."""

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.side_figures import Side, side_figures


def engine_figures(catalog: Catalog) -> list[figure.Figure]:
    return side_figures(catalog, ENGINES)


ENGINES = Side("engine", "engine", "xengine", engine_figures)
