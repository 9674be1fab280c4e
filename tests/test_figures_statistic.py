"""The one statistic: which shots a cell's cold or warm figure uses, and how they are named."""

import math

from tests.shot_tables import cell, series, table
from whichshot.figures.statistic import (
    ColdRule,
    ShotIndexRule,
    WarmRule,
    index_ranges,
    longest_run,
    outlier_flags,
    robust_z_scores,
)

WARM = cell()
COLD = cell(protocol="cold")


def speeds(values):
    return [None if v is None else {"decode_tok_s": v} for v in values]


def test_warm_rule_keeps_the_last_70_percent_of_one_process():
    shots = table(series(WARM, speeds([10, 20, 30, 40, 50, 60])))
    selection = WarmRule(0.7).select(shots, "decode_tok_s")
    assert selection.rows["series_position"].tolist() == [3, 4, 5, 6]
    assert selection.shot_indices == "3-6"
    assert selection.label.startswith("warm: shots 3-6 of 6 consecutive ok shots of one process")
    assert selection.problems == ()


def test_a_shot_that_replayed_itself_is_still_followed_by_the_next():
    # Every shot's last ids were recovered by a replay (extra_requests 1): the process served
    # requests 1-2, 3-4, ...: shot indices 1, 3, 5, 7, 9 are one run, not five broken ones.
    rows = table(series(WARM, speeds([10, 20, 30, 40, 50]), extra_requests=1))
    rows["shot_index"] = [1, 3, 5, 7, 9]
    selection = WarmRule(0.7).select(rows, "decode_tok_s")
    assert selection.rows["series_position"].tolist() == [2, 3, 4, 5] and selection.problems == ()
    gap = rows.assign(extra_requests=0)  # the same indices without a recorded replay are gaps
    assert len(longest_run(gap)) == 1


def test_a_failed_shot_ends_the_run_and_the_longest_run_is_used():
    # shot 2 failed; the process served it, so shot 3 does not follow shot 1 in the same run
    shots = table(series(WARM, speeds([10, None, 30, 40, 50, 60])))
    selection = WarmRule(0.7).select(shots, "decode_tok_s")
    assert selection.rows["series_position"].tolist() == [4, 5, 6]  # last 70 % of the 4-shot run 3-6
    assert selection.label.startswith("warm: shots 4-6 of 4 consecutive")
    assert selection.problems == (f"{shots['job_id'][0]}: used 4 consecutive ok shots of 6",)


def test_a_fresh_process_after_an_engine_death_is_never_warm():
    # shots 1-3 by process 1, then the engine died and process 2 served 4-6 (its shot indices 1-3)
    shots = table(series(WARM, speeds([10, 20, 30, 99, 98, 97]), processes=[1, 1, 1, 2, 2, 2]))
    selection = WarmRule(0.7).select(shots, "decode_tok_s")
    assert selection.rows["process_id"].nunique() == 1
    assert selection.rows["series_position"].tolist() == [2, 3]
    assert 99.0 not in selection.rows["decode_tok_s"].tolist()


def test_a_one_shot_series_gives_no_warm_value_and_says_why():
    shots = table(series(WARM, speeds([10])))
    selection = WarmRule(0.7).select(shots, "decode_tok_s")
    assert selection.rows.empty
    assert selection.problems == (f"{shots['job_id'][0]}: no two consecutive ok shots of one process",)
    assert "no series had two consecutive ok shots" in selection.label


def test_a_shot_without_a_value_is_left_out_not_fed_to_the_median():
    shots = table(series(WARM, [{"decode_tok_s": 10.0}, {"decode_tok_s": 20.0}, {"decode_tok_s": math.nan},
                                {"decode_tok_s": 40.0}]))  # fmt: skip
    selection = WarmRule(0.7).select(shots, "decode_tok_s")
    assert selection.rows["series_position"].tolist() == [2, 4]
    assert selection.shot_indices == "2, 4"


def test_cold_rule_takes_shot_one_of_each_fresh_process_that_has_a_value():
    shots = table(series(COLD, speeds([10, None, 30])))
    selection = ColdRule().select(shots, "decode_tok_s")
    assert selection.rows["series_position"].tolist() == [1, 3]
    assert selection.label == "cold: shot 1 of 2 fresh processes"


def test_shot_index_rule_reads_one_index_of_each_run():
    shots = table(series(WARM, speeds([10, 20, 30])), series(WARM, speeds([11, 21, 31]), repeat=2))
    selection = ShotIndexRule(2).select(shots, "decode_tok_s")
    assert sorted(selection.rows["decode_tok_s"]) == [20.0, 21.0]


def test_longest_run_prefers_the_earliest_of_equal_runs():
    shots = table(series(WARM, speeds([1, 2, None, 4, 5])))
    assert longest_run(shots)["series_position"].tolist() == [1, 2]


def test_warm_keep_count():
    rule = WarmRule(0.7)
    assert [rule.keep(n) for n in (1, 2, 3, 4, 6, 10)] == [1, 1, 2, 3, 4, 7]


def test_robust_z_and_outliers():
    values = [100.0, 101.0, 99.0, 100.5, 99.5, 60.0]
    assert outlier_flags(values) == [False] * 5 + [True]
    assert robust_z_scores([1.0, 2.0, 3.0]) == [None] * 3  # too few to judge
    assert robust_z_scores([5.0] * 6) == [None] * 6  # no spread at all
    assert index_ranges([5, 1, 2, 3]) == "1-3, 5"


def test_no_process_first_shot_enters_the_warm_statistic_whatever_the_fraction():
    shots = table(series(WARM, speeds([10, 20, 30, 40, 50, 60])))
    whole = WarmRule(1.0).select(shots, "decode_tok_s")
    assert whole.rows["shot_index"].tolist() == [2, 3, 4, 5, 6] and whole.shot_indices == "2-6"
    assert "shots 2-6 of 6 consecutive ok shots of one process (the last 100%, less the process's cold" in (
        whole.label
    )
    short = WarmRule(0.9).select(table(series(WARM, speeds([10, 20, 30]))), "decode_tok_s")
    assert short.rows["shot_index"].tolist() == [2, 3]  # 0.9 of 3 rounds up to all three


def test_no_process_of_a_restarted_series_gives_its_first_shot_to_the_warm_statistic():
    # process 1 served shots 1-2, died; process 2 served the other four (its shot indices 1-4)
    shots = table(series(WARM, speeds([10, 20, 99, 40, 50, 60]), processes=[1, 1, 2, 2, 2, 2]))
    selection = WarmRule(1.0).select(shots, "decode_tok_s")
    assert selection.rows["series_position"].tolist() == [4, 5, 6]
    assert 99.0 not in selection.rows["decode_tok_s"].tolist()


def test_a_series_whose_only_shot_left_is_the_cold_one_gives_no_warm_value_and_says_why():
    shots = table(series(WARM, [{"decode_tok_s": 10.0}, {"decode_tok_s": math.nan}]))
    selection = WarmRule(1.0).select(shots, "decode_tok_s")
    assert selection.rows.empty
    assert selection.problems == (
        f"{shots['job_id'][0]}: only shot 1 of its process has a value, and that is the cold shot",
    )
