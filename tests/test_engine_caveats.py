"""An engine kind's caveat rules read the shots table alone (the record they return is
whichshot.shots.caveat's, below the figures) and reach the figures with every other rule."""

from engines.openai_compat import server_counters_process_wide
from engines.transformers_engine import dequantised_weights
from tests.shot_tables import cell, series, table
from whichshot.figures.table import compute_figures


def test_an_engine_kinds_rule_reads_the_shots_and_its_caveat_reaches_the_figures():
    hf = {"engine_kind": "transformers", "engine_dtype": "bfloat16"}
    shots = table(series(cell(engine="hf"), [{}, {}, {}], **hf))
    finding = dequantised_weights(shots)
    assert finding.caveat_id == "dequantised_weights" and finding.shot_ids == frozenset(shots["shot_id"])
    assert "dequantised to bfloat16" in finding.sentence
    assert server_counters_process_wide(shots) is None  # no server's counters were read
    _figures, caveats = compute_figures(shots, [], 0.7)
    touched = {c["caveat_id"]: c["figure_ids"] for c in caveats}
    assert touched["dequantised_weights"] and "server_counters_process_wide" not in touched
