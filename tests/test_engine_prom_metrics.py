"""Per-shot deltas of server speculative counters, on recorded /metrics text.

llama_server_*.prom are real captures (see their headers); vllm_*.prom are hand-written from
vLLM's documented metric names (their headers say so).
"""

from pathlib import Path

from whichshot.engine.prom_metrics import counter_deltas, parse_prometheus

FIXTURES = Path(__file__).parent / "fixtures" / "metrics"


def read(name: str) -> dict[str, float]:
    return parse_prometheus((FIXTURES / name).read_text())


def test_llama_server_capture_gives_the_shot_counts():
    before, after = read("llama_server_before.prom"), read("llama_server_after.prom")
    deltas = counter_deltas(before, after)
    # The capture's shot: 24 tokens with ngram-simple; llama-server's own response timings said
    # draft_n 23, draft_n_accepted 15, and the counters must move by exactly that.
    assert (deltas["draft_tokens"], deltas["accepted_tokens"], deltas["drafts"]) == (23, 15, 3)
    assert deltas["source"].split("|") == [
        "llamacpp:spec_decode_num_draft_tokens_total",
        "llamacpp:spec_decode_num_accepted_tokens_total",
        "llamacpp:spec_decode_num_drafts_total",
    ]


def test_labelled_series_are_summed_and_created_samples_ignored():
    before = read("vllm_before.prom")
    assert before["vllm:spec_decode_num_draft_tokens_total"] == 210  # engine 0 + engine 1
    assert "vllm:spec_decode_num_drafts_created" in before  # a different name: never a counter here
    deltas = counter_deltas(before, read("vllm_after.prom"))
    assert (deltas["draft_tokens"], deltas["accepted_tokens"], deltas["drafts"]) == (25, 17, 5)
    assert deltas["source"].startswith("vllm:")


def test_a_counter_that_went_down_is_unknown_not_negative():
    before, after = read("llama_server_after.prom"), read("llama_server_before.prom")  # swapped: a restart
    deltas = counter_deltas(before, after)
    assert deltas["draft_tokens"] is None and deltas["accepted_tokens"] is None


def test_a_server_without_spec_counters_reports_nothing():
    text = "# TYPE requests counter\nrequests_total 3\nllamacpp:prompt_tokens_total 81\n"
    deltas = counter_deltas(parse_prometheus(text), parse_prometheus(text))
    assert deltas == {"draft_tokens": None, "accepted_tokens": None, "drafts": None, "source": None}
