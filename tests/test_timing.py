import pytest

from whichshot.measure.timing import client_timings, token_arrival_times


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
