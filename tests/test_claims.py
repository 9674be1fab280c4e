"""Claims (issue 18): a claims file refused line by line when it is not one, the readings a claim
maps to on a run's figures, and the verdict on hand-made shot tables whose figures the real figure
stage computes: a claim equal to a cold shot, to a warm shot, to neither."""

import json
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
import yaml

from tests.shot_tables import cell, series
from whichshot.claims.check import check_claims
from whichshot.claims.load import load_claims
from whichshot.errors import WhichshotError
from whichshot.figures.table import compute_figures
from whichshot.shots.axes import AXES
from whichshot.tables import record_schema


def _claim(**changes) -> dict:
    claim = {"id": "c1", "citation": "a post", "quote": "it does 100 tok/s", "value": 100,
             "unit": "tok/s", "metric": "decode_tok_s", "checkable": "relative",
             "where": {"workload": "continue_text"}}  # fmt: skip
    return {key: value for key, value in {**claim, **changes}.items() if value is not None}


def _file(tmp_path, *claims: dict) -> Path:
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"source": "a post", "claims": list(claims)}, allow_unicode=True))
    return path


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"unit": "tok/min"}, r"claim c1 field unit: 'tok/min' is not one of"),
        ({"value": None}, r"claim c1: 'value' is a required property"),
        ({"value": "fast"}, r"claim c1 field value: 'fast' is not of type 'number'"),
        ({"metric": "Decode Speed"}, r"claim c1 field metric: 'Decode Speed' does not match"),
        ({"metric": "decode_tok_z"}, r"claim c1: unknown metric 'decode_tok_z'"),
        ({"metric": "ratio"}, r"claim c1: a ratio claim has numerator and denominator"),
        ({"metric": "ratio", "unit": "tok/s", "numerator": {"metric": "decode_tok_s"},
          "denominator": {"metric": "decode_tok_s"}}, r"claim c1: a ratio is a pure number"),
        ({"where": {"gpu": "H200"}}, r"claim c1 field where: 'gpu' is not one of"),
    ],
)  # fmt: skip
def test_a_bad_claim_is_refused_with_one_line_naming_it(tmp_path, changes, said):
    with pytest.raises(WhichshotError, match=said) as refused:
        load_claims(_file(tmp_path, _claim(**changes)))
    assert "\n" not in str(refused.value)


def test_an_id_given_twice_and_an_unreadable_file_are_refused(tmp_path):
    with pytest.raises(WhichshotError, match="claim id c1 is given twice"):
        load_claims(_file(tmp_path, _claim(), _claim()))
    with pytest.raises(WhichshotError, match="cannot read it"):
        load_claims(tmp_path / "missing.yaml")


def test_units_convert_to_the_figures_own(tmp_path):
    path = _file(tmp_path, _claim(id="ms", value=250, unit="ms", metric="ttft_s"),
                 _claim(id="pct", value=48.8, unit="%", metric="acceptance_rate"),
                 _claim(id="gbs", value=936, unit="GB/s", metric="gpu_peak_bandwidth_bytes_s"))  # fmt: skip
    by_id = {c.claim_id: c for c in load_claims(path)}
    assert by_id["ms"].value == pytest.approx(0.250) and by_id["pct"].value == pytest.approx(0.488)
    assert by_id["gbs"].value == pytest.approx(936e9)


# A run whose cold shot decodes at 100 tok/s and whose warm series falls 90, 80, 70, 70, 70, 70.
COLD, WARM = cell(protocol="cold"), cell(protocol="warm")


def _figures() -> pd.DataFrame:
    shots = series(COLD, [{"decode_tok_s": 100.0}, {"decode_tok_s": 100.0}, {"decode_tok_s": 100.0}])
    shots += series(WARM, [{"decode_tok_s": v} for v in (90.0, 80.0, 70.0, 70.0, 70.0, 70.0)])
    figures, _caveats = compute_figures(pd.DataFrame(shots), [], 0.7)
    return pd.DataFrame([f.as_row() for f in figures])


def _verdict(tmp_path, **changes) -> dict:
    (row,) = check_claims(load_claims(_file(tmp_path, _claim(**changes))), _figures(), ["Some CPU"])
    return row


def test_a_claim_equal_to_a_cold_shot_matches_it_and_says_which_shot_first(tmp_path):
    # the claim names no protocol: the cold statistic is one of its 8 readings, the only one within;
    # most readings are warm shot indices, yet a protocol statistic matches: that comes first (issue 41)
    row = _verdict(tmp_path, value=100)
    assert row["status"] == "matches"
    assert row["verdict"].startswith(
        "matches the cold shot: 1 of 8 readings within (claimed 100, tolerance 5%); protocol statistics, "
        "1 of 2 within: m p64: cold shot 1 (each fresh process) = 100 (within); "
        "m p64: warm statistic (shots 3-6) = 70 (30% lower)"
    )
    readings = json.loads(row["readings"])
    assert [r["label"] for r in readings if r["within"]] == ["m p64: cold shot 1 (each fresh process)"]


def test_a_claim_equal_to_a_warm_shot_matches_that_shot(tmp_path):
    row = _verdict(tmp_path, value=80, tolerance=0.01)
    assert row["status"] == "minority match"
    assert "m p64: cold shot 1 (each fresh process) = 100 (25% higher)" in row["verdict"]
    assert row["verdict"].endswith("; other readings within: m p64: warm shot 2 = 80")


def test_a_claim_equal_to_no_reading_is_not_reproduced_with_the_spread(tmp_path):
    row = _verdict(tmp_path, value=150)
    assert row["status"] == "not reproduced"
    assert row["verdict"].startswith("not reproduced: 0 of 8 readings within (claimed 150, tolerance 5%)")
    assert "; ours is 33% to 53% lower under every reading; closest m p64: cold shot 1" in row["verdict"]
    assert row["readings_within"] == 0 and len(row["figure_ids"]) > 2


def test_a_relative_claim_pairs_cells_on_every_other_axis(tmp_path):
    ratio = {"metric": "ratio", "unit": "x", "value": 100 / 70, "where": None,
             "numerator": {"metric": "decode_tok_s", "where": {"protocol": "cold"}},
             "denominator": {"metric": "decode_tok_s", "where": {"protocol": "warm"}}}  # fmt: skip
    row = _verdict(tmp_path, **ratio)
    assert row["status"] == "matches" and len(json.loads(row["readings"])) == 1
    assert _verdict(tmp_path, **{**ratio, "value": 1.0})["status"] == "not reproduced"


def test_hardware_that_is_not_this_runs_makes_an_absolute_claim_not_comparable(tmp_path):
    row = _verdict(tmp_path, checkable="here", stated={"hardware": "Apple M1 Max"})
    assert row["status"] == "not comparable here" and "'Apple M1 Max' is not this run's" in row["verdict"]
    same = _verdict(tmp_path, value=70, checkable="here", stated={"hardware": "some cpu"})
    assert same["status"] == "matches"


def test_a_claim_the_grid_does_not_cover_says_so(tmp_path):
    row = _verdict(tmp_path, where={"workload": "continue_text", "rest_s": 3}, why="needs rests_s 3")
    assert row["status"] == "not covered" and "needs rests_s 3" in row["verdict"]
    assert _verdict(tmp_path, checkable="no", why="no such axis")["verdict"] == "no such axis"


def test_the_config_refuses_a_bad_claims_file_before_anything_runs(tmp_path):
    from tests.pipeline import load_config
    from whichshot.config import check_config

    bad = _file(tmp_path, _claim(unit="furlongs"))
    with pytest.raises(WhichshotError, match="claim c1 field unit"):
        check_config({**load_config("smoke"), "claims": [str(bad)]})
    assert check_config({**load_config("smoke"), "claims": [str(_file(tmp_path, _claim()))]})["claims"]


def test_claims_can_grow_the_grid_by_the_cells_they_name(tmp_path):
    from tests.pipeline import load_config
    from whichshot.config import check_config
    from whichshot.measure.grid import all_jobs

    warm = {"protocol": "warm"}
    rest = {"metric": "ratio", "unit": "x", "value": 1.08, "where": None,
            "numerator": {"metric": "prefill_tok_s", "where": {**warm, "rest_s": 3}},
            "denominator": {"metric": "prefill_tok_s", "where": {**warm, "rest_s": 0}}}  # fmt: skip
    recall = {"id": "c2", "metric": "speedup_vs_none", "unit": "x", "where": {"workload": "verbatim_recall"}}
    path = _file(
        tmp_path, _claim(**rest), _claim(**recall), _claim(id="c3", checkable="no", where={"rest_s": 45})
    )
    config = {**load_config("smoke"), "claims": [str(path)],
              "workloads": {"document_tokens": 384, "max_output_tokens": 480}}  # fmt: skip
    assert check_config(config)["protocol"]["rests_s"] == [0]  # not asked: the grid stays
    grown = check_config({**config, "claims_extend_grid": True})
    assert grown["protocol"]["rests_s"] == [0, 3]  # 45 comes from an uncheckable claim: not added
    assert grown["workloads"]["names"] == ["verbatim_recall"]
    assert {job.rest_s for job in all_jobs(grown) if job.protocol == "warm"} == {0.0, 3.0}


def test_a_claim_may_select_cells_on_every_grid_axis(tmp_path) -> None:
    """Any axis of the table, and nothing else (the refusal of 'gpu' is above)."""
    for axis in AXES:
        (claim,) = load_claims(_file(tmp_path, _claim(where={axis: "x"})))
        assert claim.where == {axis: "x"}


def _warm_claim(**changes) -> dict:
    return _claim(where={"workload": "continue_text", "protocol": "warm"}, **changes)


def test_a_verdict_says_how_many_readings_it_compared_and_leads_with_the_protocol_statistic(tmp_path):
    # the warm claim's readings: the warm statistic (70) and warm shots 1-6 (90, 80, 70, 70, 70, 70)
    row = _verdict(tmp_path, **_warm_claim(value=70))
    assert row["status"] == "matches"
    assert (row["readings_compared"], row["readings_within"]) == (7, 5)
    assert (row["statistics_compared"], row["statistics_within"]) == (1, 1)
    assert row["verdict"].startswith(
        "matches the warm statistic: 5 of 7 readings within (claimed 70, tolerance 5%); protocol statistic: "
        "m p64: warm statistic (shots 3-6) = 70 (within)"
    )
    assert json.loads(row["readings"])[0]["label"] == "m p64: warm statistic (shots 3-6)"
    jsonschema.validate(row, record_schema("claim_verdicts"))


def test_a_match_by_a_minority_of_readings_is_marked_so_and_names_the_statistic_it_misses(tmp_path):
    row = _verdict(tmp_path, **_warm_claim(value=90, tolerance=0.01))  # only warm shot 1 is 90
    assert row["status"] == "minority match"
    assert (row["readings_compared"], row["readings_within"], row["statistics_within"]) == (7, 1, 0)
    assert row["verdict"].startswith(
        "minority match: no protocol statistic matches, only 1 of 7 readings within (claimed 90, "
        "tolerance 1%); protocol statistic: "
        "m p64: warm statistic (shots 3-6) = 70 (22% lower); other readings within: m p64: warm shot 1 = 90"
    )
    jsonschema.validate(row, record_schema("claim_verdicts"))  # the new status is one the table knows


def test_the_report_and_summary_show_a_minority_match_and_the_counts(tmp_path):
    from whichshot.report.claims import claims_markdown

    rows = [_verdict(tmp_path, **_warm_claim(value=90, tolerance=0.01)), _verdict(tmp_path, value=150)]
    text = claims_markdown(rows)
    assert "2 claims: 1 minority match, 1 not reproduced." in text
    assert "| minority match (1 of 7 readings) |" in text and "| not reproduced (0 of 8 readings) |" in text
    assert text.index("minority match (1") < text.index("not reproduced (0")


def test_a_figure_over_every_shot_is_not_called_the_warm_statistic(tmp_path):
    row = _verdict(tmp_path, **_warm_claim(metric="client_vs_engine_prefill_ratio", value=1, unit="x"))
    (reading,) = json.loads(row["readings"])
    assert reading["label"] == "m p64: every ok shot (shots 1-6)" and reading["statistic"]
