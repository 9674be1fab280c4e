"""Claims against a run already on disk (issue 18): the claims_check target reads a committed
reference run's figures, measures nothing, and writes the verdicts with their own small report."""

import pandas as pd
import pytest
import yaml

from tests.pipeline import REPO, load_config, run_pipeline

pytestmark = pytest.mark.e2e
REFERENCE = REPO / "results" / "reference" / "cpu_default"


def test_claims_are_checked_against_an_existing_run_without_measuring(tmp_path):
    claims = tmp_path / "paper.yaml"
    claims.write_text(yaml.safe_dump({"source": "a paper <b>", "claims": [
        {"id": "warm-like-cold", "citation": "§2", "quote": "warm runs as fast as cold <script>",
         "value": 1.0, "unit": "x", "tolerance": 0.15, "metric": "decode_tok_s_warm_cold_ratio",
         "where": {"workload": "continue_text"}, "checkable": "relative"},
        {"id": "m1-speed", "citation": "§3", "quote": "979 tok/s", "value": 979, "unit": "tok/s",
         "metric": "prefill_tok_s", "where": {"workload": "continue_text"}, "checkable": "here",
         "stated": {"hardware": "Apple M1 Max"}},
    ]}))  # fmt: skip
    config = {**load_config("smoke"), "claims": [str(claims)], "claims_against": str(REFERENCE)}
    result = run_pipeline(tmp_path / "work", config, "claims_check")
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "work" / "results" / "claims_check"
    verdicts = pd.read_parquet(out / "claims.parquet").set_index("claim_id")
    assert verdicts.loc["warm-like-cold", "status"] == "matches"
    figures = set(pd.read_parquet(REFERENCE / "figures.parquet")["figure_id"])
    assert set(verdicts.loc["warm-like-cold", "figure_ids"]) <= figures
    assert verdicts.loc["m1-speed", "status"] == "not comparable here"
    html = (out / "claims.html").read_text()
    assert "&lt;script&gt;" in html and "<script>" not in html
    assert "warm-like-cold" in (out / "claims.md").read_text()
    assert not (tmp_path / "work" / "results" / "shots").exists()  # nothing was measured


def test_claims_check_without_a_run_says_what_it_needs(tmp_path):
    claims = tmp_path / "c.yaml"
    claims.write_text(yaml.safe_dump({"source": "s", "claims": [
        {"id": "c", "citation": "s", "quote": "q", "value": 1, "unit": "x", "metric": "speedup_vs_none",
         "checkable": "relative"}]}))  # fmt: skip
    config = {**load_config("smoke"), "claims": [str(claims)]}
    result = run_pipeline(tmp_path / "work", config, "claims_check")
    assert result.returncode != 0
    assert "claims_check needs the run to check: --config claims_against=PATH" in result.stderr
