import pytest

from whichshot.stats import WarmRule, outlier_flags, robust_z_scores, warm_statistic


@pytest.mark.parametrize(
    ("n_shots", "expected"),
    [(6, [3, 4, 5, 6]), (10, [4, 5, 6, 7, 8, 9, 10]), (1, [1]), (2, [2]), (3, [2, 3])],
)
def test_warm_rule_keeps_last_seventy_percent(n_shots, expected):
    assert WarmRule(0.7).shot_indices(n_shots) == expected


def test_warm_statistic_is_median_of_kept_shots():
    # shot 1 is slow (cold), shots 3-6 kept: median of 845, 850, 840, 848 = 846.5
    values = [980.0, 900.0, 845.0, 850.0, 840.0, 848.0]
    assert warm_statistic(values, WarmRule(0.7)) == pytest.approx(846.5)


def test_warm_rule_describes_itself():
    assert WarmRule(0.7).describe(6) == "median of the last 70% of 6 shots (shots 3-6)"


def test_robust_z_flags_a_single_slow_shot():
    values = [100.0, 101.0, 99.0, 100.5, 99.5, 60.0]
    flags = outlier_flags(values)
    assert flags == [False, False, False, False, False, True]


def test_robust_z_undefined_without_spread():
    assert robust_z_scores([5.0] * 6) == [None] * 6
    assert robust_z_scores([1.0, 2.0, 50.0]) == [None, None, None]
