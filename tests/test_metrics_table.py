"""The metrics table (whichshot/figures/metrics.py): every metric a figure family emits has its place in
the report's tables or sections, or goes to "Other figures" on purpose (a row under "other")."""

from pathlib import Path

import pandas as pd
import pytest

from whichshot.figures import cell_figures
from whichshot.figures.answer_figures import ANSWER_METRICS
from whichshot.figures.constants import CONSTANTS
from whichshot.figures.metrics import (
    CHECKS,
    METRICS,
    PLACES,
    SECTIONS,
    columns,
    named_metrics,
    places,
)
from whichshot.figures.peer_figures import PEER_METRICS
from whichshot.figures.workload_figures import COUNT_RATIOS, SHARES

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_RUNS = sorted((ROOT / "results" / "reference").rglob("figures.parquet"))


def test_there_are_reference_runs():
    assert len(REFERENCE_RUNS) >= 10


@pytest.mark.parametrize("path", REFERENCE_RUNS, ids=lambda p: str(p.parent.relative_to(ROOT / "results")))
def test_every_metric_of_a_reference_run_has_its_place(path):
    metrics = set(pd.read_parquet(path, columns=["metric"])["metric"])
    unplaced = sorted(m for m in metrics if not places(m))
    assert not unplaced, (
        f"add these to figures/metrics.py METRICS (under 'other' if no table shows them): {unplaced}"
    )


def test_every_metric_a_family_declares_is_in_the_table():
    declared = {
        *cell_figures.CELL_COLUMNS,
        *cell_figures.WORKLOAD_COLUMNS,
        *cell_figures.DRAFTED_COLUMNS,
        *cell_figures.TRACE_COLUMNS,
        *cell_figures.STREAM_COLUMNS,
        *(metric for metric, *_ in COUNT_RATIOS),
        *(metric for metric, *_ in SHARES),
        *(constant.metric for constant in CONSTANTS),
        *ANSWER_METRICS,
        *PEER_METRICS,
        *(ratio for _values, _ours, ratio, _unit in PEER_METRICS.values()),
    }
    assert declared - named_metrics() == set()


def test_rows_name_a_known_place_and_a_table_shows_a_metric_once():
    assert {m.shown_in for m in METRICS} == set(PLACES)
    for place in PLACES:
        metrics = [m for m, *_ in columns(place)]
        assert len(metrics) == len(set(metrics)), place
    assert [key for key, *_ in SECTIONS][-1] == "other"  # it takes whatever no table or section took


def test_places_and_the_engine_kernel_family():
    assert places("decode_tok_s") == ("headline", "workload", "trace_requests", "per_side", "load", "series")
    assert places("cpu_engine_matmul_q4_k_flop_s") == ("ceilings",)
    assert places("recall_similarity") == ("other",)
    assert places("no_such_metric") == ()
    assert [name for _m, name, _meaning in CHECKS][:2] == ["task", "loop"]
