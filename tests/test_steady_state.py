"""Each warm series classified by its trend (issue 49, figures.steady_state): flat, warm-up, slowdown
or no steady state, by a Theil-Sen drift that one wild shot moves little; the answer counts them."""

import pandas as pd
import pytest

from tests.shot_tables import cell, series, table
from whichshot.figures.aggregations import recompute
from whichshot.figures.answer_figures import steady
from whichshot.figures.steady_state import (
    CLASSES,
    FLAT,
    NO_STEADY,
    SLOWDOWN,
    TOO_FEW_SHOTS,
    WARM_UP,
    classify,
    drift,
)
from whichshot.figures.table import compute_figures
from whichshot.report.answer import answer_block

MARGIN = 0.02


def test_a_straight_rise_drifts_by_its_span_and_one_wild_shot_moves_the_drift_little():
    assert drift([100.0, 110.0, 121.0]) == pytest.approx(2 * 0.0953, abs=1e-3)
    assert abs(drift([50.0, 50.2, 20.0, 50.1, 50.3])) < MARGIN


@pytest.mark.parametrize(
    ("values", "kept", "expected"),
    [
        ([50.0, 50.5, 49.8], 3, FLAT),
        ([40.0, 45.0, 50.0], 3, NO_STEADY),  # every warm shot kept, and they rise: never settled
        ([40.0, 45.0, 50.0, 50.2, 50.1, 50.3], 4, WARM_UP),
        ([60.0, 55.0, 50.0, 50.2, 50.1, 49.9], 4, SLOWDOWN),
        ([50.0, 50.1, 50.0, 45.0, 40.0, 35.0], 4, NO_STEADY),  # the kept shots fall
        ([50.0, 50.2, 20.0, 50.1, 50.3], 4, FLAT),  # one wild shot is not a trend
        ([50.0, 60.0], 1, TOO_FEW_SHOTS),
    ],
)
def test_each_series_is_classified_by_its_trend(values, kept, expected):
    assert classify(values, kept, MARGIN) == expected


def test_the_answer_counts_the_classes_and_each_count_recomputes_from_its_shots():
    warm = cell(protocol="warm")
    shapes = {1: (30.0, 50.0, 50.2, 49.9, 50.1, 50.0, 50.1), 2: (30.0, 40.0, 45.0, 50.0, 50.1, 50.0, 50.1),
              3: (30.0, 50.0, 47.0, 44.0, 41.0, 38.0, 35.0)}  # fmt: skip
    parts = [series(warm, [{"decode_tok_s": v} for v in values], repeat=r) for r, values in shapes.items()]
    shots = table(*parts)
    figures, _caveats = compute_figures(shots, [], 0.7, verdict_margin=MARGIN)
    frame = pd.DataFrame([f.as_row() for f in figures])
    counts = {state: frame[frame["metric"] == steady("decode_tok_s", state)].iloc[0] for state in CLASSES}
    # the warm rule keeps the last 5 of 7: series 2 settled after rising, series 3 kept falling
    assert {state: row["value"] for state, row in counts.items()} == {
        FLAT: 1.0, WARM_UP: 1.0, SLOWDOWN: 0.0, NO_STEADY: 1.0}  # fmt: skip
    by_id, values = shots.set_index("shot_id"), dict(zip(frame["figure_id"], frame["value"], strict=True))
    for row in counts.values():
        assert recompute(row, by_id, values) == row["value"]
    decode = answer_block(frame).cells[1]
    assert decode["texts"][-1] == "1 / 1 / 0 / 1"
