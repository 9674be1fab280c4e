"""Per cell: the one statistic of every value column the run measured (speeds, TTFT, clocks, power,
energy, draft length, copy fraction), how many of its shots are ok, and for warm cells the
speed-by-shot-index curve (energy per token with its verdict: energy_figures)."""

import pandas as pd

from whichshot.figures import figure
from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import Cell, group_cells, series_of
from whichshot.figures.statistic import ANY_STATUS, Selection, ShotIndexRule, longest_run
from whichshot.shots.axes import BASE_WORKLOAD, NO_DRAFT, ONE_STREAM, TRACE_WORKLOAD

# Columns summarised per cell wherever the run measured them (any shot of the engine has a value).
CELL_COLUMNS = (
    "ttft_s",
    "prefill_tok_s",
    "decode_tok_s",
    "engine_prefill_tok_s",
    "engine_decode_tok_s",
    "sm_clock_median_mhz",
    "cpu_freq_median_mhz",
    "gpu_power_median_w",
    "gpu_energy_power_w",
    "energy_j_per_token",
    # What an engine that logs its start-up said of it (vLLM), and its own TTFT: beside the cold shot.
    "engine_ttft_s",
    "engine_load_weights_s",
    "engine_compile_s",
    "engine_warmup_s",
    "engine_init_s",
)
# Only workload cells copy from their prompt or repeat themselves, and only their drafted cells
# have a draft length.
WORKLOAD_COLUMNS = ("copy_fraction", "self_repetition", "prompt_self_repetition", "recall_similarity")
DRAFTED_COLUMNS = ("engine_draft_mean_len",)
# Only cells of several streams in flight have the streams' own statistics (one stream's are its
# decode_tok_s and ttft_s).
STREAM_COLUMNS = ("stream_decode_tok_s_mean", "stream_decode_tok_s_min", "aggregate_decode_tok_s",
                  "stream_ttft_max_s")  # fmt: skip
# A trace's mix weighs each request by its output tokens (natural length differs per request).
TRACE_COLUMNS = ("output_tokens",)
# The curve by shot index, for warm cells: the speeds and one clock (the GPU's where it was read).
BY_INDEX_COLUMNS = ("prefill_tok_s", "decode_tok_s")
CLOCK_COLUMNS = ("sm_clock_median_mhz", "cpu_freq_median_mhz")
AGGREGATION = {"cold": "median", "warm": "median_of_series_medians"}
FORMULA = {
    "cold": "median over fresh processes of shot 1's {column}",
    "warm": "median over series of the median {column} of the warm rule's shots",
}


def cell_figures(catalog: Catalog) -> list[figure.Figure]:
    shots = catalog.shots
    figures = [_shots_ok({}, shots)]  # the whole run's
    for cell, rows in group_cells(shots):
        figures.append(_shots_ok(cell, rows))
        if (rows["status"] == "skipped").all():
            continue  # a trace request that did not fit its context: nothing ran, nothing to summarise
        columns = CELL_COLUMNS + (WORKLOAD_COLUMNS if cell["workload"] != BASE_WORKLOAD else ())
        columns += DRAFTED_COLUMNS if cell["spec_mode"] != NO_DRAFT else ()
        columns += TRACE_COLUMNS if cell["workload"] == TRACE_WORKLOAD else ()
        columns += STREAM_COLUMNS if (cell["parallel_streams"] or ONE_STREAM) > ONE_STREAM else ()
        for column in columns:
            if measured_here(shots, cell, column):
                figures.append(_statistic(catalog, cell, rows, column))
        if cell["protocol"] == "warm":
            figures += _by_shot_index(shots, cell, rows)
    return figures


def measured_here(shots: pd.DataFrame, cell: Cell, column: str) -> bool:
    """The column has a value in some shot of this engine: a cell without one gets 'no value'."""
    return bool(shots.loc[shots["engine"] == cell["engine"], column].notna().any())


def _statistic(catalog: Catalog, cell: Cell, rows: pd.DataFrame, column: str) -> figure.Figure:
    protocol = cell["protocol"]
    problems = ()
    if column == "energy_j_per_token":
        rows, problems = _per_token_of_every_stream(rows)
    selection = catalog.rule(protocol).select(rows, column)
    return figure.from_shots(
        column,
        cell,
        selection,
        AGGREGATION[protocol],
        [column],
        formula=FORMULA[protocol].format(column=column),
        computed_by=cell_figures,
        note="; ".join([*problems, *selection.problems]),
    )


def _per_token_of_every_stream(rows: pd.DataFrame) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """The rows with energy_j_per_token only where it divides the shot's energy by every stream's
    tokens: a shot of several streams recorded without streams_output_tokens (before version 8)
    divided all the streams' energy by stream 1's tokens, N times too high, and gives no value."""
    several = pd.to_numeric(rows["parallel_streams"], errors="coerce").fillna(ONE_STREAM) > ONE_STREAM
    stream_one_only = several & rows["streams_output_tokens"].isna() & rows["energy_j_per_token"].notna()
    if not stream_one_only.any():
        return rows, ()
    rows = rows.copy()
    rows.loc[stream_one_only, "energy_j_per_token"] = None
    return rows, (f"energy_j_per_token of {int(stream_one_only.sum())} shot(s) of several streams left out: "
                  "recorded before streams_output_tokens, it divided every stream's energy by stream 1's "
                  "tokens",)  # fmt: skip


def _shots_ok(cell: Cell, rows: pd.DataFrame) -> figure.Figure:
    """How many of the cell's shots (or the run's, for cell {}) are ok; it cites every one of them."""
    where = f"{cell['protocol']}: every shot of the cell" if cell else "every shot of the run"
    statuses = "ok, failed or skipped" if (rows["status"] == "skipped").any() else "ok or failed"
    selection = Selection(rows, rows, f"{where}, {statuses}", "", ANY_STATUS)
    failed = rows[rows["status"] != "ok"]
    note = "; ".join(f"{r['shot_id']}: {r['error']}" for r in failed.head(5).to_dict("records"))
    return figure.from_shots(
        "shots_ok",
        cell,
        selection,
        "count_rows",
        ["status"],
        unit="shots",
        formula=f"ok shots of the {len(rows)} shots",
        computed_by=cell_figures,
        note=note,
    )


def _by_shot_index(shots: pd.DataFrame, cell: Cell, rows: pd.DataFrame) -> list[figure.Figure]:
    indices = sorted({int(i) for _job, s in series_of(rows) for i in longest_run(s)["shot_index"]})
    figures = []
    clock = next((c for c in CLOCK_COLUMNS if measured_here(shots, cell, c)), None)
    for column in (*BY_INDEX_COLUMNS, *([clock] if clock else [])):
        if not measured_here(shots, cell, column):
            continue
        for index in indices:
            selection = ShotIndexRule(index).select(rows, column)
            if selection.rows.empty:
                continue
            figures.append(
                figure.from_shots(
                    column,
                    cell,
                    selection,
                    "median",
                    [column],
                    shot_index=index,
                    formula=f"median over series of {column} at shot index {index}",
                    computed_by=cell_figures,
                )
            )
    return figures
