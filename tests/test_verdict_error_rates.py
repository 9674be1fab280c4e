"""The verdict's error rates, proved by seeded simulation at the shapes the shipped configs use
(issues 41 and 49): with nothing to find, or a difference as large as the margin, it says "differs"
at most 5 % of the time, unpaired (speed-ups, separate cold processes) and paired (each warm series'
shot 1 against its own warm shots); of a difference outside the margin it says "same within" at most
5 % of the time; and at the noise measured on the project's 2-core VM (tests/fixtures/noise, written
by tools/noise_fixture.py) the default config finds a 10 % cold/warm difference in prefill and a x1.5
drafting speed-up (four processes a side) at least 80 % of the time, and a 10 % decode difference too;
read with the classical sd (wild processes counted in full) decode needs twenty series, and the test
states that shortfall. `python tools/verdict_rates.py` prints every rate. The draws run the
production functions on whole arrays (figures.verdict_sim); the last tests check that a figure
computed from shots gives the same verdict."""

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
from whichshot.figures.verdict_sim import (
    SPREADS,
    PairedShape,
    PairedSpread,
    Shape,
    config_shapes,
    fixture_spreads,
    paired_config_shapes,
    paired_rates,
    verdict_rates,
)

ROOT = Path(__file__).resolve().parents[1]
SIMS = 10_000
MARGIN = 0.02
CONFIGS = [config_as_run(path) for path in sorted((ROOT / "config").glob("*.yaml"))]
SHIPPED = sorted({shape for config in CONFIGS for shape in config_shapes(config)})
PAIRED_SHIPPED = sorted({shape for config in CONFIGS for shape in paired_config_shapes(config)})
DEFAULT_CONFIG = config_as_run(ROOT / "config" / "config.yaml")
DEFAULT = config_shapes(DEFAULT_CONFIG)
(DEFAULT_PAIRED,) = paired_config_shapes(DEFAULT_CONFIG)
FIXTURE = fixture_spreads()
# The paired spreads to prove the false-differs rate under: the fixture's (normal and heavy tails) and
# a quiet host with a noisy shot 1 and a noisy host with noisy warm shots.
PAIRED_SPREADS = (
    *FIXTURE["paired"]["prefill_tok_s"],
    *FIXTURE["paired"]["decode_tok_s"],
    PairedSpread(first=0.02, within=0.01),
    PairedSpread(first=0.01, within=0.05, tails_df=3),
)
POWER = 0.80
SPEEDUP = 0.5  # x1.5


def test_the_default_config_pairs_ten_series_a_cell_and_runs_four_processes_a_side_for_speed_ups():
    assert PairedShape(10, 3) == DEFAULT_PAIRED  # shots 2-4 of 4 are the warm shots
    assert Shape(4, 1, 4, 1) in DEFAULT


@pytest.mark.parametrize("shape", SHIPPED, ids=str)
@pytest.mark.parametrize("spread", (*SPREADS, FIXTURE["speedup"]), ids=str)
@pytest.mark.parametrize("effect", [0.0, -MARGIN, MARGIN])
def test_with_nothing_to_find_it_says_differs_at_most_5_percent_of_the_time(shape, spread, effect):
    rates = verdict_rates(shape, spread, effect=effect, margin=MARGIN, sims=SIMS, seed=41)
    assert rates["differs"] <= 0.05, rates


@pytest.mark.parametrize("shape", PAIRED_SHIPPED, ids=str)
@pytest.mark.parametrize("spread", PAIRED_SPREADS, ids=str)
@pytest.mark.parametrize("effect", [0.0, -MARGIN, MARGIN])
def test_paired_with_nothing_to_find_it_says_differs_at_most_5_percent_of_the_time(shape, spread, effect):
    rates = paired_rates(shape, spread, effect=effect, margin=MARGIN, sims=SIMS, seed=41)
    assert rates["differs"] <= 0.05, rates


@pytest.mark.parametrize("shape", SHIPPED, ids=str)
@pytest.mark.parametrize("effect", [-0.03, 0.03, 0.05])
def test_of_a_difference_outside_the_margin_it_says_same_at_most_5_percent_of_the_time(shape, effect):
    for spread in SPREADS:
        rates = verdict_rates(shape, spread, effect=effect, margin=MARGIN, sims=SIMS, seed=43)
        assert rates["same"] <= 0.05, (spread, rates)


@pytest.mark.parametrize("shape", PAIRED_SHIPPED, ids=str)
@pytest.mark.parametrize("effect", [-0.03, 0.03, 0.05])
def test_paired_of_a_difference_outside_the_margin_it_says_same_at_most_5_percent_of_the_time(shape, effect):
    for spread in PAIRED_SPREADS:
        rates = paired_rates(shape, spread, effect=effect, margin=MARGIN, sims=SIMS, seed=43)
        assert rates["same"] <= 0.05, (spread, rates)


def test_at_the_measured_noise_the_default_finds_a_10_percent_prefill_difference():
    for spread in FIXTURE["paired"]["prefill_tok_s"]:  # normal and heavy tails
        rates = paired_rates(DEFAULT_PAIRED, spread, effect=-0.10, margin=MARGIN, sims=SIMS, seed=47)
        assert rates["differs"] >= POWER, (spread, rates)


def test_at_the_measured_noise_the_default_finds_a_x1_5_speed_up_with_four_processes_a_side():
    speedups = [s for s in DEFAULT if s.side_shots == s.reference_shots == 1 and s.side_processes >= 3]
    assert speedups
    for shape in speedups:
        rates = verdict_rates(shape, FIXTURE["speedup"], effect=SPEEDUP, margin=MARGIN, sims=SIMS, seed=47)
        assert rates["differs"] >= POWER, (shape, rates)


def test_at_the_measured_noise_the_default_finds_a_10_percent_decode_difference():
    for spread in FIXTURE["paired"]["decode_tok_s"]:  # normal and heavy tails
        rates = paired_rates(DEFAULT_PAIRED, spread, effect=-0.10, margin=MARGIN, sims=SIMS, seed=47)
        assert rates["differs"] >= POWER, (spread, rates)


def test_where_processes_spread_as_the_classical_sd_counts_decode_needs_twenty_series():
    """The stated shortfall: read with the classical sd (every wild process counted in full), decode's
    shot 1 spreads about 10 % (the fixture), and the default's ten series find a 10 % decode difference
    less than 80 % of the time; twenty reach it (run until decided's second look)."""
    noisy = FIXTURE["paired_classical"]["decode_tok_s"]

    def power(processes: int) -> float:
        shape = PairedShape(processes, DEFAULT_PAIRED.warm_shots)
        return paired_rates(shape, noisy, effect=-0.10, margin=MARGIN, sims=SIMS, seed=47)["differs"]

    assert power(DEFAULT_PAIRED.processes) < POWER <= power(20)


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
