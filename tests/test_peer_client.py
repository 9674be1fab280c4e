"""The peer client for real: a warm series on the cached llama.cpp build and SmolLM2, then llama-benchy
(the peer extra) against a fresh server of ours through whichshot.measure.peer; its numbers parsed,
its figures and our ratios over them with their kinds. And the parser on a recorded output."""

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.fault_kit import job_context, warm_job
from whichshot.atomic import JsonlJournal
from whichshot.figures.peer_figures import PEER_METRICS
from whichshot.figures.table import compute_figures
from whichshot.measure.peer import find_tool, parse_peer_json, peer_step
from whichshot.measure.protocol import run_job

FIXTURE = Path(__file__).parent / "fixtures" / "peer" / "llama-benchy-0.4.0.json"
PROMPT_TOKENS, OUTPUT_TOKENS, RUNS = 64, 16, 2
ON = {"enabled": True, "command": None, "runs": RUNS, "timeout_s": 600}


def test_parser_on_recorded_output():
    """A JSON file llama-benchy 0.4.0 wrote in a run of the test below (tests/fixtures/peer)."""
    parsed = parse_peer_json(json.loads(FIXTURE.read_text()))
    assert parsed["version"] == "0.4.0"
    assert (parsed["prompt_tokens"], parsed["output_tokens"]) == (PROMPT_TOKENS, OUTPUT_TOKENS)
    for name in ("e2e_ttft_s", "ttfr_s", "decode_tok_s", "prefill_tok_s"):
        assert parsed[name] and all(v > 0 for v in parsed[name]), name
    # Seconds from its milliseconds; the first content chunk comes after the first chunk of any kind.
    assert all(1e-3 < t < 60 for t in parsed["e2e_ttft_s"])
    assert min(parsed["e2e_ttft_s"]) >= min(parsed["ttfr_s"])


def test_not_installed_is_not_measured(tmp_path):
    ctx = job_context(tmp_path, warm_job(1, length=PROMPT_TOKENS), output_tokens=OUTPUT_TOKENS)
    record = peer_step(ctx, {**ON, "command": "no-such-llama-benchy"})
    assert record["applies"] and record["run"] is None and "not installed" in record["not_run"]
    off = peer_step(ctx, {**ON, "enabled": False})
    assert not off["applies"]


@pytest.fixture(scope="module")
def series_and_peer(tmp_path_factory):
    if find_tool(ON) is None:
        pytest.skip("llama-benchy is not installed (pip install '.[peer]')")
    tmp = tmp_path_factory.mktemp("peer")
    job = warm_job(3, length=PROMPT_TOKENS)
    ctx = job_context(tmp, job, output_tokens=OUTPUT_TOKENS)
    ctx.log_dir.mkdir(parents=True)
    shots = run_job(ctx, JsonlJournal(tmp / "shots.jsonl"))
    peer = peer_step(ctx, ON)
    return job, shots, peer


def test_peer_numbers_are_parsed(series_and_peer):
    _job, _shots, peer = series_and_peer
    run = peer["run"]
    assert run["error"] is None, run
    assert run["argv"][0].endswith("llama-benchy") and "--exact-tg" in run["argv"]
    parsed = run["parsed"]
    assert (parsed["prompt_tokens"], parsed["output_tokens"]) == (PROMPT_TOKENS, OUTPUT_TOKENS)
    for name in ("e2e_ttft_s", "decode_tok_s", "prefill_tok_s"):
        assert len(parsed[name]) >= 1 and all(v > 0 for v in parsed[name]), name


def test_peer_figures_and_ratios(series_and_peer):
    job, shots, peer = series_and_peer
    bench_run = {"job_id": job.job_id, "brackets": [], "peer_client": peer}
    figures, caveats = compute_figures(pd.DataFrame(shots), [bench_run], 0.7)
    by_metric = {f.metric: f for f in figures}
    for metric, (_name, _ours, ratio_metric, _unit) in PEER_METRICS.items():
        tool = by_metric[metric]
        assert tool.value > 0 and tool.kind == "derived" and tool.timed_by == "llama-benchy", tool
        ratio = by_metric[ratio_metric]
        assert ratio.value > 0 and ratio.kind == "derived" and ratio.unit == "ratio", ratio
        ours = next(f for f in figures if f.metric == _ours and f.cell_id == ratio.cell_id)
        assert ratio.value == pytest.approx(ours.value / tool.value)
        print(f"{ratio_metric}: {ratio.value:.3f} (ours {ours.value:.4g} / llama-benchy {tool.value:.4g})")
    fired = {c["caveat_id"] for c in caveats}
    assert "peer_client_work_differs" in fired and "peer_client_not_measured" not in fired


def test_not_run_peer_gives_not_measured_figures(series_and_peer):
    job, shots, _peer = series_and_peer
    why = "llama-benchy is not installed"
    missing = {"tool": "llama-benchy", "applies": True, "not_run": why, "work": None, "run": None}
    bench_run = {"job_id": job.job_id, "brackets": [], "peer_client": missing}
    figures, caveats = compute_figures(pd.DataFrame(shots), [bench_run], 0.7)
    peer = [f for f in figures if f.metric in PEER_METRICS]
    assert peer and all(f.value is None for f in peer)
    assert not [f for f in figures if f.metric.endswith("_vs_peer_ratio")]
    (caveat,) = [c for c in caveats if c["caveat_id"] == "peer_client_not_measured"]
    assert "not installed" in caveat["sentence"] and set(caveat["figure_ids"]) >= {f.figure_id for f in peer}
