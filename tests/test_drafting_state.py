"""Drafting state across requests (issue 31): a drafter whose state carries across the requests of
one process (n-gram) may accept more on warm shots than on a process's first request. Where warm
acceptance exceeds cold by more than DRAFTER_WARM_ACCEPTANCE_MARGIN, the drafted warm figures of
that cell say the drafter learnt from earlier requests."""

import pandas as pd
import pytest

from tests.shot_tables import cell, series, table
from whichshot.figures.cells import cell_id
from whichshot.figures.constants import DRAFTER_WARM_ACCEPTANCE_MARGIN
from whichshot.figures.table import compute_figures

CAVEAT = "drafter_learnt_across_requests"
RECALL = {"workload": "verbatim_recall", "prompt_tokens_requested": 384}
DRAFTED_WARM = cell(**RECALL, spec_mode="ngram")
DRAFTED_COLD = cell(**RECALL, spec_mode="ngram", protocol="cold")
PLAIN_WARM = cell(**RECALL)
PLAIN_COLD = cell(**RECALL, protocol="cold")
DRAFTED_TOKENS = 60
COLD_ACCEPTED = 24  # 40 % of the drafts on a process's first request


def _drafted(requests_seen: int | None, accepted: int) -> dict:
    return {"drafter_requests_seen": requests_seen, "engine_draft_tokens": DRAFTED_TOKENS,
            "engine_draft_accepted": accepted, "engine_draft_mean_len": 1 + accepted / 10,
            "decode_tok_s": 50.0 + accepted}  # fmt: skip


def _shots(warm_accepted: int, requests_seen: bool = True, with_cold_cell: bool = True) -> pd.DataFrame:
    """A drafted warm series of six shots (the first its process's first request), three cold
    shots of fresh processes, and their no-draft counterparts (no drafter: no count)."""
    seen = range(6) if requests_seen else [None] * 6
    warm = [_drafted(s, COLD_ACCEPTED if s == 0 else warm_accepted) for s in seen]
    cold = [_drafted(0 if requests_seen else None, COLD_ACCEPTED) for _ in range(3)]
    parts = [series(DRAFTED_WARM, warm), series(PLAIN_WARM, [{}] * 6), series(PLAIN_COLD, [{}] * 3)]
    if with_cold_cell:
        parts.append(series(DRAFTED_COLD, cold))
    return table(*parts)


def _figure(figures, of: dict, metric: str, shot_index: int | None = None):
    (found,) = [
        f for f in figures if f.cell_id == cell_id(of) and f.metric == metric and f.shot_index == shot_index
    ]
    return found


@pytest.mark.parametrize("with_cold_cell", [True, False], ids=["cold cell", "warm series' shot 1 only"])
def test_warm_acceptance_above_cold_puts_the_caveat_on_the_drafted_warm_figures(with_cold_cell):
    shots = _shots(warm_accepted=48, with_cold_cell=with_cold_cell)  # 80 % warm against 40 % cold
    figures, caveats = compute_figures(shots, [], 0.7)
    (caveat,) = [c for c in caveats if c["caveat_id"] == CAVEAT]
    learnt = shots[(shots["job_id"] == shots.loc[0, "job_id"]) & (shots["shot_index"] > 1)]
    assert set(caveat["shot_ids"]) == set(learnt["shot_id"])
    assert "80.0%" in caveat["sentence"] and "40.0%" in caveat["sentence"]
    for metric in ("decode_tok_s", "engine_draft_mean_len", "acceptance_rate", "speedup_vs_none"):
        assert CAVEAT in _figure(figures, DRAFTED_WARM, metric).caveat_ids, metric
    assert CAVEAT in _figure(figures, DRAFTED_WARM, "decode_tok_s", shot_index=2).caveat_ids
    # the process's first request is the cold one: its point on the curve, like the cold cell, is not
    untouched = [_figure(figures, DRAFTED_WARM, "decode_tok_s", shot_index=1)]
    untouched += [_figure(figures, DRAFTED_WARM, m) for m in ("ttft_s", "prefill_tok_s", "shots_ok")]
    untouched += [_figure(figures, PLAIN_WARM, "decode_tok_s")]
    if with_cold_cell:
        untouched += [_figure(figures, DRAFTED_COLD, m) for m in ("decode_tok_s", "acceptance_rate")]
    assert not [f.figure_id for f in untouched if CAVEAT in f.caveat_ids]


@pytest.mark.parametrize(("warm_accepted", "fires"), [(26, False), (28, True), (20, False)])
def test_only_a_rise_beyond_the_margin_fires(warm_accepted, fires):
    rise = (warm_accepted - COLD_ACCEPTED) / DRAFTED_TOKENS  # 3.3, 6.7 and -6.7 points
    assert (rise > DRAFTER_WARM_ACCEPTANCE_MARGIN) == fires
    _figures, caveats = compute_figures(_shots(warm_accepted), [], 0.7)
    assert (CAVEAT in {c["caveat_id"] for c in caveats}) == fires


def test_shots_without_the_drafters_request_count_give_no_caveat():
    # recorded before drafter_requests_seen: which shots the drafter saw first is not known
    _figures, caveats = compute_figures(_shots(warm_accepted=48, requests_seen=False), [], 0.7)
    assert CAVEAT not in {c["caveat_id"] for c in caveats}
