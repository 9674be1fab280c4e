"""The verify probe's repetition rule (measure/settle.py, issue 53): warm up until two requests in a
row agree, then time until the last `repetitions` spread at most the limit, each up to its cap."""

import random

import pytest

from whichshot.measure.settle import RepeatRule, repeat_until_steady, spread

RULE = RepeatRule(repetitions=3, max_repetitions=8, max_warm_ups=4, settle_factor=1.05, spread_limit=1.25)


def _taker(warm: list[float | None], timed: list[float | None]):
    """take(warm_up) handing out these samples in turn, and the calls it got."""
    calls: list[bool] = []
    queues = {True: list(warm), False: list(timed)}

    def take(warm_up: bool) -> float | None:
        calls.append(warm_up)
        return queues[warm_up].pop(0)

    return take, calls


def test_spread_is_slowest_over_fastest_and_unknown_with_a_gap():
    assert spread([2.0, 2.5, 2.2]) == pytest.approx(1.25)
    assert spread([2.0, None]) is None and spread([]) is None and spread([0.0, 1.0]) is None


def test_a_point_that_settles_at_once_runs_two_warm_ups_and_its_repetitions():
    take, calls = _taker([10.0, 10.2], [10.0, 10.5, 11.0])
    found = repeat_until_steady(take, RULE)
    assert calls == [True, True, False, False, False]
    assert found.settled and found.steady and found.window == [0, 1, 2]
    assert found.spread == pytest.approx(1.1)


def test_warm_up_goes_on_until_two_in_a_row_agree():
    take, calls = _taker([30.0, 14.0, 10.3, 10.1], [10.0, 10.0, 10.0])
    found = repeat_until_steady(take, RULE)
    assert found.warm_ups == [30.0, 14.0, 10.3, 10.1] and found.settled and calls.count(True) == 4


def test_a_warm_up_that_never_settles_stops_at_its_cap_and_says_so():
    take, _calls = _taker([30.0, 20.0, 14.0, 11.0], [10.0, 10.0, 10.0])
    found = repeat_until_steady(take, RULE)
    assert len(found.warm_ups) == 4 and not found.settled and found.steady


def test_timing_goes_on_until_the_last_repetitions_hold_still():
    """An outlier in the first three: the window slides past it and the point's samples leave it out."""
    take, _calls = _taker([10.0, 10.0], [10.0, 19.0, 10.5, 10.2, 10.4, 99.0])
    found = repeat_until_steady(take, RULE)
    assert found.timed == [10.0, 19.0, 10.5, 10.2, 10.4] and found.window == [2, 3, 4]
    assert found.steady and found.spread == pytest.approx(10.5 / 10.2)


def test_a_point_that_never_holds_still_stops_at_the_cap_and_keeps_its_spread():
    timed = [10.0, 14.0] * 4
    take, calls = _taker([10.0, 10.0], timed)
    found = repeat_until_steady(take, RULE)
    assert calls.count(False) == 8 and found.window == [5, 6, 7]
    assert not found.steady and found.spread == pytest.approx(1.4)


def test_a_request_without_a_sample_keeps_the_window_open():
    take, _calls = _taker([10.0, 10.0], [10.0, None, 10.0, 10.0, 10.0])
    found = repeat_until_steady(take, RULE)
    assert len(found.timed) == 5 and found.window == [2, 3, 4] and found.steady


def test_seeded_jitter_ends_steady_or_at_the_cap_and_the_window_is_the_last_requests():
    """Step times where half the requests are moved by up to x1.6 (and half the warm-ups are x1.3
    slower): whatever happens, the rule stops at the first window that held still or at its cap, and
    what it reports matches the samples it took. Over the seeds, both ends happen."""
    ends = set()
    for seed in range(20):
        rng = random.Random(seed)

        def take(warm_up: bool, rng=rng) -> float:
            base = 2.0 * (1.3 if warm_up and rng.random() < 0.5 else 1.0)
            return base * (1.0 + (0.6 if rng.random() < 0.5 else 0.02) * rng.random())

        found = repeat_until_steady(take, RULE)
        window = [found.timed[i] for i in found.window]
        assert found.window == list(range(len(found.timed) - 3, len(found.timed)))
        assert found.spread == pytest.approx(max(window) / min(window))
        assert found.steady == (found.spread <= 1.25)
        assert found.steady or len(found.timed) == RULE.max_repetitions
        assert all(spread(found.timed[i - 3 : i]) > 1.25 for i in range(3, len(found.timed)))
        assert 2 <= len(found.warm_ups) <= 4 and (found.settled or len(found.warm_ups) == 4)
        ends.add((found.steady, found.settled))
    assert ends == {(True, True), (True, False), (False, True), (False, False)}


def test_a_cap_below_the_repetitions_still_times_the_repetitions():
    take, calls = _taker([10.0, 10.0], [10.0, 20.0, 10.0])
    found = repeat_until_steady(take, RepeatRule(3, 1, 2, 1.05))
    assert calls.count(False) == 3 and not found.steady
