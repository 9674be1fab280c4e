"""The verdict's error rates, proved by seeded simulation at the shapes the shipped configs use
(issue 41): with nothing to find, or a difference as large as the margin, it says "differs" at most
5 % of the time; of a difference outside the margin it says "same within" at most 5 % of the time;
and at the default config's cold/warm shape it finds a true 10 % effect at least 85 % of the time
(86.8 % with 2 % spread between processes and 1 % between shots: `python tools/verdict_rates.py`). The
draws run the production functions on whole arrays (figures.verdict_sim); a last test checks that a
figure computed from shots gives the same verdict."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.shot_tables import cell, series, table
from whichshot.config import config_as_run
from whichshot.figures.table import compute_figures
from whichshot.figures.verdict import (
    TOO_FEW,
    log_mean_interval,
    process_values,
    verdict_codes,
)
from whichshot.figures.verdict_sim import SPREADS, Shape, config_shapes, verdict_rates

ROOT = Path(__file__).resolve().parents[1]
SIMS = 10_000
MARGIN = 0.02
SHIPPED = sorted(
    {
        shape
        for path in sorted((ROOT / "config").glob("*.yaml"))
        for shape in config_shapes(config_as_run(path))
    },
    key=lambda s: (s.side_processes, s.side_shots, s.reference_processes, s.reference_shots),
)
DEFAULT = config_shapes(config_as_run(ROOT / "config" / "config.yaml"))


def test_the_default_config_gives_its_cold_warm_and_speedup_comparisons_a_verdict():
    # three cold processes against three warm series; two processes a side for the speed-ups
    assert Shape(3, 1, 3, 3) in DEFAULT and Shape(2, 1, 2, 1) in DEFAULT


@pytest.mark.parametrize("shape", SHIPPED, ids=str)
@pytest.mark.parametrize("spread", SPREADS, ids=str)
@pytest.mark.parametrize("effect", [0.0, -MARGIN, MARGIN])
def test_with_nothing_to_find_it_says_differs_at_most_5_percent_of_the_time(shape, spread, effect):
    rates = verdict_rates(shape, spread, effect=effect, margin=MARGIN, sims=SIMS, seed=41)
    assert rates["differs"] <= 0.05, rates


@pytest.mark.parametrize("shape", SHIPPED, ids=str)
@pytest.mark.parametrize("effect", [-0.03, 0.03, 0.05])
def test_of_a_difference_outside_the_margin_it_says_same_at_most_5_percent_of_the_time(shape, effect):
    for spread in SPREADS:
        rates = verdict_rates(shape, spread, effect=effect, margin=MARGIN, sims=SIMS, seed=43)
        assert rates["same"] <= 0.05, (spread, rates)


def test_at_the_default_cold_warm_shape_a_true_10_percent_effect_is_found():
    rates = verdict_rates(Shape(3, 1, 3, 3), SPREADS[0], effect=-0.10, margin=MARGIN, sims=SIMS, seed=47)
    assert rates["differs"] >= 0.85, rates  # 0.8625 in tools/verdict_rates.py
    noisy = verdict_rates(Shape(3, 1, 3, 3), SPREADS[2], effect=-0.10, margin=MARGIN, sims=SIMS, seed=47)
    assert noisy["differs"] < rates["differs"]  # a noisier host finds it less often (about a third)


def _figures(parts) -> pd.DataFrame:
    figures, _caveats = compute_figures(table(*parts), [], 0.7, verdict_margin=MARGIN)
    return pd.DataFrame([f.as_row() for f in figures]).set_index("metric")


WARM, COLD = cell(protocol="warm"), cell(protocol="cold")


def test_a_figure_from_shots_gives_the_verdict_the_simulation_proves():
    cold = series(COLD, [{"decode_tok_s": v} for v in (48.0, 49.5, 47.0)])
    warms = [series(WARM, [{"decode_tok_s": v + d} for d in (3.0, 0.2, -0.1, 0.3, 0.0)], repeat=r)
             for r, v in ((1, 50.0), (2, 51.0), (3, 50.4))]  # fmt: skip
    frame = _figures([cold, *warms])
    shots = table(cold, *warms)
    side = process_values(shots[(shots["protocol"] == "cold")], "decode_tok_s")
    kept = shots[(shots["protocol"] == "warm") & (shots["shot_index"] > 1)]
    reference = process_values(kept, "decode_tok_s")
    assert len(side) == len(reference) == 3
    _point, low, high = log_mean_interval(np.log(side), np.log(reference))
    metric = "decode_tok_s_cold_vs_warm_delta"
    assert frame.loc[f"{metric}_low", "value"] == pytest.approx(float(np.expm1(low)))
    assert frame.loc[f"{metric}_high", "value"] == pytest.approx(float(np.expm1(high)))
    code = float(verdict_codes(np.expm1(low), np.expm1(high), MARGIN))
    assert frame.loc[f"{metric}_verdict", "value"] == code


def test_one_process_a_side_is_too_few_whatever_its_shots_and_shows_the_range():
    # the warm series' three shots are one process: not three draws
    frame = _figures(
        [series(COLD, [{"decode_tok_s": 48.0}]), series(WARM, [{"decode_tok_s": v} for v in (50, 51, 49)])]
    )
    metric = "decode_tok_s_cold_vs_warm_delta"
    assert pd.isna(frame.loc[f"{metric}_low", "value"]) and pd.isna(frame.loc[f"{metric}_verdict", "value"])
    assert frame.loc[f"{metric}_verdict", "note"] == TOO_FEW
    # the range over the one pair of processes: the cold shot over the warm series' median of shots 2-3
    assert frame.loc[f"{metric}_range_low", "value"] == pytest.approx(48.0 / 50.0 - 1)
    assert frame.loc[f"{metric}_range_high", "value"] == pytest.approx(48.0 / 50.0 - 1)
