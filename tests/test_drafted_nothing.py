"""A speculative mode that drafted nothing (issue 43): llama-server leaves its draft counts out of the
timings then, which the engine records as 0 drafted, and the report shows its acceptance as 0 %, not
"—" (does not apply); a mode whose engine counted nothing at all still shows "—"."""

import dataclasses

import pandas as pd
import pytest

from tests.fault_kit import real_engine, server_settings, token_ids
from tests.shot_tables import cell, series, table
from whichshot.engine.base import ShotRequest
from whichshot.figures.aggregations import recompute
from whichshot.figures.table import compute_figures
from whichshot.measure.records import engine_fields
from whichshot.report.layout import WORKLOADS, lay_out
from whichshot.report.summary import table_markdown
from whichshot.report.tables import build_tables


def recall(mode: str) -> dict:
    return cell(workload="verbatim_recall", prompt_tokens_requested=384, spec_mode=mode, protocol="cold")


def figures_of(drafted: dict) -> pd.DataFrame:
    shots = table(series(recall("none"), [{}] * 2), series(recall("ngram"), [drafted] * 2))
    figures, _caveats = compute_figures(shots, [], 0.7)
    return pd.DataFrame([f.as_row() for f in figures]), shots


def acceptance_column(figures: pd.DataFrame) -> list[str]:
    """The acceptance cell of each workload row of summary.md, no-draft mode first."""
    (workloads,) = [table for table in lay_out(build_tables(figures), {}) if table.spec is WORKLOADS]
    lines = [line for line in table_markdown(workloads) if line.startswith("|")]
    header = [h.strip() for h in lines[0].strip("|").split("|")]
    at = header.index("acceptance (%)")
    return [line.strip("|").split("|")[at].strip() for line in lines[2:]]


def test_a_mode_that_drafted_nothing_shows_acceptance_0_percent():
    figures, shots = figures_of({"engine_draft_tokens": 0, "engine_draft_accepted": 0})
    (acceptance,) = figures[figures["metric"] == "acceptance_rate"].to_dict("records")
    assert acceptance["value"] == 0.0 and acceptance["note"] == "drafted nothing (0 draft tokens counted)"
    assert recompute(acceptance, shots.set_index("shot_id", drop=False), {}) == 0.0
    assert acceptance_column(figures) == ["—", "0 D"]


def test_a_mode_whose_engine_counted_no_drafts_shows_no_acceptance():
    figures, _shots = figures_of({"engine_draft_tokens": None, "engine_draft_accepted": None})
    assert "acceptance_rate" not in set(figures["metric"])
    assert acceptance_column(figures) == ["—", "—"]


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("mode", "drafted"), [({"type": "ngram-mod"}, 0), ({}, None)], ids=["ngram-mod", "none"]
)
def test_llama_server_that_drafts_nothing_records_0_drafted(tmp_path, mode, drafted):
    real = real_engine()
    args = tuple(real.engine.speculative_args(mode))
    settings = dataclasses.replace(server_settings(), extra_args=args)
    server = real.engine.start(real.build, real.model_path, settings, tmp_path / "server.log")
    try:
        # Ordinary ids with no repeated n-gram: nothing for an n-gram drafter to copy.
        outcome = server.shot(ShotRequest(token_ids(32), 8, True, 60))
    finally:
        server.stop()
    fields = engine_fields(outcome)
    assert outcome.engine_timings["predicted_n"] == 8
    assert (fields["engine_draft_tokens"], fields["engine_draft_accepted"]) == (drafted, drafted)
