import pandas as pd
import pytest

from engines.openai_compat import drafting_not_declared
from whichshot.engine.base import ShotOutcome
from whichshot.measure.refusals import DraftedWithoutMode, check_outcome
from whichshot.measure.timing import (
    StreamNotTimed,
    check_arrived_over_time,
    client_timings,
    token_arrival_times,
)


def test_arrival_times_expand_multi_token_events():
    assert token_arrival_times([(1.0, 1), (1.5, 3), (2.0, 0)]) == [1.0, 1.5, 1.5, 1.5]


def test_client_timings_from_arrivals():
    # request at t=10, first token at 10.5, then 10 more tokens over 0.2 s
    arrivals = [10.5 + 0.02 * i for i in range(11)]
    timings = client_timings(10.0, arrivals, t_end_s=10.75, prompt_tokens=1000)
    assert timings.ttft_s == pytest.approx(0.5)
    assert timings.prefill_tok_s == pytest.approx(2000.0)
    assert timings.decode_tok_s == pytest.approx(50.0)
    assert timings.e2e_s == pytest.approx(0.75)
    assert timings.output_tokens == 11


def test_client_timings_without_tokens_are_not_invented():
    timings = client_timings(1.0, [], t_end_s=2.0, prompt_tokens=10)
    assert timings.ttft_s is None and timings.decode_tok_s is None and timings.prefill_tok_s is None
    one = client_timings(1.0, [1.2], t_end_s=1.3, prompt_tokens=10)
    assert one.decode_tok_s is None and one.ttft_s == pytest.approx(0.2)


def _events(times: list[float], per_event: int = 1) -> list[tuple[float, int]]:
    return [(t, per_event) for t in times]


PLAIN = _events([0.1 + 0.01 * i for i in range(64)])  # a token every 10 ms after a 100 ms TTFT


def test_a_plain_stream_read_token_by_token_is_timed():
    check_arrived_over_time(
        PLAIN, deliveries=list(range(64)), accepted_drafts=0, t_request_s=0.0, t_end_s=0.75, prompt_tokens=64
    )


def _pieces(count: int, events: int = 64) -> list[int]:
    return [i * count // events for i in range(events)]


@pytest.mark.parametrize("pieces", [1, 2, 6, 15])
def test_a_stream_whose_tokens_mostly_came_together_is_refused(pieces):
    """Whole (1), two pieces (2), every 4 KiB (6 pieces of 10-11 events), 15 pieces: more than 3/4 of
    the tokens came in reads behind earlier tokens, and no drafting explains them."""
    with pytest.raises(StreamNotTimed, match="buffered the stream") as refused:
        check_arrived_over_time(PLAIN, deliveries=_pieces(pieces), accepted_drafts=0)
    assert "\n" not in str(refused.value)


def test_tokens_that_came_together_are_forgiven_as_far_as_accepted_drafts_explain_them():
    # 64 tokens in 10 deliveries, 54 together; the engine accepted 40 drafts (they leave with their step).
    check_arrived_over_time(PLAIN, deliveries=_pieces(10), accepted_drafts=40)
    with pytest.raises(StreamNotTimed, match=r"54 of 64 tokens came in reads behind earlier tokens \(10 "):
        check_arrived_over_time(PLAIN, deliveries=_pieces(10), accepted_drafts=0)
    check_arrived_over_time(
        PLAIN, deliveries=_pieces(10), accepted_drafts=None
    )  # a drafter that does not say


def test_the_tokens_of_one_event_are_on_time_with_it():
    """An event of two tokens (one held back inside a UTF-8 character), each event its own delivery."""
    check_arrived_over_time(_events([0.1 + 0.01 * i for i in range(32)], 2), deliveries=list(range(32)))


def test_a_burst_behind_a_long_ttft_is_refused_unless_the_prompt_explains_it():
    burst = _events([0.95 + 0.0005 * i for i in range(64)])  # each its own read, all within 3% of the shot
    with pytest.raises(StreamNotTimed, match=r"^TTFT was 95% of the end-to-end time and the 63 tokens"):
        check_arrived_over_time(
            burst,
            deliveries=list(range(64)),
            accepted_drafts=0,
            t_request_s=0.0,
            t_end_s=1.0,
            prompt_tokens=64,
        )
    # A long prompt's prefill takes most of the shot legitimately: decode is slower than prefill there.
    short_answer = _events([0.95, 0.96, 0.97])
    check_arrived_over_time(
        short_answer,
        deliveries=[0, 1, 2],
        accepted_drafts=0,
        t_request_s=0.0,
        t_end_s=1.0,
        prompt_tokens=4096,
    )


def _outcome(per_event: int, **timings) -> ShotOutcome:
    events = _events([0.1 + 0.01 * i for i in range(8)], per_event)
    return ShotOutcome(
        0.0,
        0.2,
        events,
        [],
        "",
        16,
        engine_timings=timings,
        token_event_deliveries=list(range(8)),
        drafting_unchosen=True,
    )


def test_a_none_shot_of_several_tokens_per_event_is_refused_where_no_draft_count_is_declared():
    with pytest.raises(DraftedWithoutMode, match=r"^its 8 token events carried 24 tokens \(3\.00 each"):
        check_outcome("none", _outcome(3), 16)
    check_outcome("none", _outcome(1), 16)  # one per step: a plain decoder
    chosen = _outcome(3)
    chosen.drafting_unchosen = False  # whichshot chose its flags (llama_cpp: two where UTF-8 held one back)
    check_outcome("none", chosen, 16)
    with pytest.raises(DraftedWithoutMode, match="by its timings' draft_n"):  # declared: its own count says
        check_outcome("none", _outcome(3, draft_n=16, draft_n_accepted=16), 16)
    check_outcome("ngram", _outcome(3, draft_n=16, draft_n_accepted=16), 16)  # a drafting mode: its tokens


def test_none_shots_of_a_server_without_draft_counts_carry_a_caveat():
    shots = pd.DataFrame(
        {
            "shot_id": ["a", "b", "c"],
            "engine_kind": ["openai", "openai", "llama_cpp"],
            "spec_mode": ["none", "none", "none"],
            "engine_draft_tokens": [None, 0, None],
            "server_spec_draft_tokens_delta": [None, None, None],
        }
    )
    found = drafting_not_declared(shots)
    assert found.caveat_id == "drafting_not_declared" and list(found.shot_ids) == ["a"]
