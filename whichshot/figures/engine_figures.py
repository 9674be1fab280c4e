"""Engines side by side: the same cell (every axis but the engine) on each engine of the run, set
against the run's first engine (config order). Each engine's own speeds, speed-ups and lossless
shares are its cells' figures; here only what compares two engines: speed ratios (same mode) and
the share of shots whose output tokens are the same."""

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import Cell, group_cells, shots_in
from whichshot.figures.statistic import EveryShotRule

# (the cells' figure, the ratio's metric)
RATIOS = (("decode_tok_s", "xengine_decode_ratio"), ("prefill_tok_s", "xengine_prefill_ratio"))
SAME_OUTPUT_METRIC = "xengine_same_output_share"


def reference_engine(catalog: Catalog) -> str | None:
    """The engine every other is compared with: the run's first (None with one engine)."""
    engines = list(dict.fromkeys(catalog.shots["engine"]))
    return engines[0] if len(engines) > 1 else None


def engine_figures(catalog: Catalog) -> list[figure.Figure]:
    reference = reference_engine(catalog)
    if reference is None:
        return []
    figures = []
    for cell, _rows in group_cells(catalog.shots):
        theirs = {**cell, "engine": reference}
        if cell["engine"] == reference or catalog.find(theirs, "shots_ok") is None:
            continue
        figures += _ratios(catalog, cell, theirs) + _same_output(catalog, cell, theirs)
    return figures


def _ratios(catalog: Catalog, cell: Cell, theirs: Cell) -> list[figure.Figure]:
    figures = []
    for column, metric in RATIOS:
        ours_figure, their_figure = catalog.find(cell, column), catalog.find(theirs, column)
        if ours_figure is None or their_figure is None:
            continue
        figures.append(
            figure.from_figures(
                metric,
                [ours_figure, their_figure],
                "ratio",
                unit="ratio",
                baseline=theirs,
                computed_by=engine_figures,
                note=f"vs {theirs['engine']}",
                formula=f"{column} of {cell['engine']} / {column} of {theirs['engine']}, same cell otherwise",
            )
        )
    return figures


def _same_output(catalog: Catalog, cell: Cell, theirs: Cell) -> list[figure.Figure]:
    both = shots_in(catalog.shots, {k: v for k, v in cell.items() if k != "engine"})
    both = both[both["engine"].isin([cell["engine"], theirs["engine"]])]
    selection = EveryShotRule().select(both, "output_sha256")
    if selection.rows["engine"].nunique() < 2:
        return []
    params = {"side_axis": "engine", "side": cell["engine"], "reference": theirs["engine"]}
    return [
        figure.from_shots(
            SAME_OUTPUT_METRIC,
            cell,
            selection,
            "paired_share_equal",
            ["output_sha256", "prompt_sha256"],
            unit="fraction",
            parameters=params,
            baseline=theirs,
            computed_by=engine_figures,
            note=f"vs {theirs['engine']}",
            formula=f"share of shot pairs (same repeat and series position) whose output token ids equal "
            f"{theirs['engine']}'s, among pairs given the same prompt token ids",
        )
    ]
