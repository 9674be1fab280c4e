"""Every ok shot's token ids, the engine's own count and the request agree; ids llama-server holds
back mid-character are recovered exactly, or the shot fails with its reason."""

import pytest

from tests.fault_kit import real_engine, server_settings
from whichshot.engine.base import ShotRequest
from whichshot.engine.stream import TokenCountMismatch, reconcile, stream_outcome

EMOJI_PROMPT = "Write five lines of Chinese poetry about the moon, with emoji 🌙✨ after each line."


def request(n: int = 4, ignore_eos: bool = True) -> ShotRequest:
    return ShotRequest(prompt_token_ids=[1, 2, 3], max_output_tokens=n, ignore_eos=ignore_eos, timeout_s=10)


def event(ids, predicted, text="x", stop=False, **extra) -> tuple[float, dict]:
    return (float(predicted), {"tokens": ids, "tokens_predicted": predicted, "content": text, "stop": stop,
                               **extra})  # fmt: skip


def final(n, stop_type="limit") -> tuple[float, dict]:
    return (9.0, {"tokens": [], "content": "", "stop": True, "stop_type": stop_type,
                  "timings": {"predicted_n": n, "prompt_n": 3}})  # fmt: skip


def test_held_back_ids_are_counted_at_their_event_and_left_missing():
    # the first two tokens end inside one character: the stream sends only the second's id
    outcome = stream_outcome(
        0.0, 10.0, [event([11], 2, "月"), event([12], 3), event([13], 4), final(4)], request()
    )
    assert outcome.output_token_ids == [None, 11, 12, 13]
    assert outcome.token_events == [(2.0, 2), (3.0, 1), (4.0, 1)]  # both tokens timed at their arrival
    assert outcome.output_tokens_streamed == 3
    with pytest.raises(TokenCountMismatch, match="1 of 4 token ids missing .* first at position 0"):
        reconcile(outcome, request())


def test_counts_that_disagree_fail_the_shot():
    whole = [event([10 + i], i + 1) for i in range(4)]
    reconcile(stream_outcome(0.0, 1.0, [*whole, final(4)], request()), request())  # agrees
    with pytest.raises(TokenCountMismatch, match="engine reports 5"):
        reconcile(stream_outcome(0.0, 1.0, [*whole, final(5)], request()), request())
    short = stream_outcome(0.0, 1.0, [*whole[:3], final(3, "eos")], request())
    with pytest.raises(TokenCountMismatch, match="did not honour ignore_eos"):
        reconcile(short, request())
    reconcile(short, request(ignore_eos=False))  # a natural stop before the limit is fine
    with pytest.raises(TokenCountMismatch, match="stop reason 'limit'"):
        reconcile(stream_outcome(0.0, 1.0, [*whole[:3], final(3)], request()), request(ignore_eos=False))


@pytest.mark.e2e
def test_real_multibyte_output_is_reconciled_exactly(tmp_path):
    real = real_engine()
    server = real.engine.start(real.build, real.model_path, server_settings(1024), tmp_path / "server.log")
    try:
        prompt = server.tokenize(server.apply_chat_template([{"role": "user", "content": EMOJI_PROMPT}]),
                                 parse_special=True)  # fmt: skip
        outcome = server.shot(ShotRequest(prompt, 64, ignore_eos=True, timeout_s=300))
        text = server.detokenize(outcome.output_token_ids)
    finally:
        server.stop()
    assert any(ord(c) > 0x2FFF for c in outcome.output_text), outcome.output_text  # emoji or CJK came out
    assert outcome.output_tokens_streamed < 64  # llama-server held ids back mid-character...
    assert outcome.output_ids_source == "replay" and outcome.extra_requests == 1  # ...recovered exactly
    assert len(outcome.output_token_ids) == 64 == outcome.engine_timings["predicted_n"]
    assert sum(n for _t, n in outcome.token_events) == 64
    assert text == outcome.output_text
