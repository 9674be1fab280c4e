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
from whichshot.figures.statistic import WarmRule
from whichshot.figures.table import compute_figures
from whichshot.figures.verdict import (
    TOO_FEW,
    log_mean_interval,
    paired_log_interval,
    paired_values,
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
    # paired: each warm series' shot 1 against its own kept warm shots
    warms = [series(WARM, [{"decode_tok_s": v + d} for d in (-2.0, 3.0, 0.2, -0.1, 0.3, 0.0)], repeat=r)
             for r, v in ((1, 50.0), (2, 51.0), (3, 50.4))]  # fmt: skip
    frame = _figures(warms)
    firsts, kept = paired_values(_kept(table(*warms)), "decode_tok_s")
    assert len(firsts) == len(kept) == 3
    _point, low, high = paired_log_interval(np.log(firsts) - np.log(kept))
    _assert_figures_say(frame, low, high)


def test_unpaired_figures_from_shots_give_the_verdict_the_simulation_proves():
    # the warm series' shot 1 failed: the separate cold processes against the warm series (Welch)
    cold = series(COLD, [{"decode_tok_s": v} for v in (48.0, 49.5, 47.0)])
    warms = [series(WARM, [None, *({"decode_tok_s": v + d} for d in (3.0, 0.2, -0.1, 0.3, 0.0))], repeat=r)
             for r, v in ((1, 50.0), (2, 51.0), (3, 50.4))]  # fmt: skip
    frame = _figures([cold, *warms])
    shots = table(cold, *warms)
    side = process_values(shots[(shots["protocol"] == "cold")], "decode_tok_s")
    reference = process_values(_kept(shots)[lambda r: r["shot_index"] > 1], "decode_tok_s")
    assert len(side) == len(reference) == 3
    _point, low, high = log_mean_interval(np.log(side), np.log(reference))
    _assert_figures_say(frame, low, high)


def _kept(shots: pd.DataFrame) -> pd.DataFrame:
    """The warm cell's shot 1 and its last 70 % (the warm rule's), as the figures keep them."""
    warm = shots[(shots["protocol"] == "warm") & (shots["status"] == "ok")]
    keep = WarmRule(0.7).keep
    parts = [series.iloc[len(series) - keep(len(series)) :] for _job, series in warm.groupby("job_id")]
    return pd.concat([warm[warm["shot_index"] == 1], *parts]).drop_duplicates("shot_id")


def _assert_figures_say(frame: pd.DataFrame, low: float, high: float) -> None:
    metric = "decode_tok_s_cold_vs_warm_delta"
    assert frame.loc[f"{metric}_low", "value"] == pytest.approx(float(np.expm1(low)))
    assert frame.loc[f"{metric}_high", "value"] == pytest.approx(float(np.expm1(high)))
    code = float(verdict_codes(np.expm1(low), np.expm1(high), MARGIN))
    assert frame.loc[f"{metric}_verdict", "value"] == code


def test_one_process_is_too_few_whatever_its_shots_and_shows_its_own_ratio():
    # the warm series' shots are one process: one pair, not several
    frame = _figures([series(WARM, [{"decode_tok_s": v} for v in (48.0, 50, 51, 49)])])
    metric = "decode_tok_s_cold_vs_warm_delta"
    assert pd.isna(frame.loc[f"{metric}_low", "value"]) and pd.isna(frame.loc[f"{metric}_verdict", "value"])
    assert frame.loc[f"{metric}_verdict", "note"] == TOO_FEW
    # its shot 1 over the median of its kept warm shots (the last 70 % of 4: shots 2-4, never shot 1)
    assert frame.loc[f"{metric}_range_low", "value"] == pytest.approx(48.0 / 50.0 - 1)
    assert frame.loc[f"{metric}_range_high", "value"] == pytest.approx(48.0 / 50.0 - 1)
