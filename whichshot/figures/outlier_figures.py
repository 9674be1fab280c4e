"""Per cell: how many shots are speed outliers of their own series (robust z on the median
absolute deviation), and whether decode slowed with them."""

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.aggregations import outlier_mask
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import group_cells
from whichshot.figures.statistic import MIN_VALUES_FOR_OUTLIERS, ROBUST_Z_THRESHOLD, EveryShotRule

OUTLIER_METRIC = "outlier_shots"
SPEED_COLUMNS = ("prefill_tok_s", "decode_tok_s")


def outlier_figures(catalog: Catalog) -> list[figure.Figure]:
    figures = []
    for cell, rows in group_cells(catalog.shots):
        selection = EveryShotRule().select(rows, None)
        if not _judgeable(selection.rows):
            continue
        params = {"threshold": ROBUST_Z_THRESHOLD}
        flagged = selection.rows[outlier_mask(selection.rows, SPEED_COLUMNS, ROBUST_Z_THRESHOLD)]
        figures.append(
            figure.from_shots(
                OUTLIER_METRIC,
                cell,
                selection,
                "count_outliers",
                list(SPEED_COLUMNS),
                unit="shots",
                parameters=params,
                computed_by=outlier_figures,
                note=_note(flagged, selection.rows),
                formula=f"shots whose prefill or decode tok/s has |robust z| > {ROBUST_Z_THRESHOLD} "
                "(outlier_robust_z) within their series: 0.6745 (x - median) / median absolute deviation, "
                f"series of {MIN_VALUES_FOR_OUTLIERS}+ shots",
            )
        )
    return figures


def outlier_rows(shots: pd.DataFrame) -> pd.DataFrame:
    """The ok shots that are outliers of their series (what outlier_figures counts)."""
    rows = EveryShotRule().select(shots, None).rows
    return rows[outlier_mask(rows, SPEED_COLUMNS, ROBUST_Z_THRESHOLD)]


def _judgeable(rows: pd.DataFrame) -> bool:
    sizes = [series[c].notna().sum() for _job, series in rows.groupby("job_id") for c in SPEED_COLUMNS]
    return any(n >= MIN_VALUES_FOR_OUTLIERS for n in sizes)


def _note(flagged: pd.DataFrame, rows: pd.DataFrame) -> str:
    notes = []
    for row in flagged.to_dict("records"):
        series = rows[rows["job_id"] == row["job_id"]]["decode_tok_s"].dropna()
        decode, median = row["decode_tok_s"], float(series.median()) if len(series) else None
        if decode is None or pd.isna(decode) or median is None:
            words = "decode not measured"
        elif decode < median:
            words = f"decode slowed at the same time ({decode:.4g} < series median {median:.4g} tok/s)"
        else:
            words = f"decode did not slow ({decode:.4g} >= series median {median:.4g} tok/s)"
        notes.append(f"{row['shot_id']}: {words}")
    return "; ".join(notes)
