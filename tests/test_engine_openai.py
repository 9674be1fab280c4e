"""The openai engine for real, against llama-server's own OpenAI API (the cached CPU build):
a cold series through the protocol runner, token counts from usage, /metrics counter deltas."""

from pathlib import Path

import pytest

from engines.openai_compat import chunks_outcome, substitute
from tests.fault_kit import real_engine
from tests.pipeline import filled_config
from whichshot.atomic import JsonlJournal
from whichshot.cache import cache_root
from whichshot.config import with_defaults
from whichshot.engine import load_engine
from whichshot.engine.base import ServerSettings, ShotRequest
from whichshot.engine.sse import MalformedStream
from whichshot.measure.grid import Job
from whichshot.measure.protocol import JobContext, run_job

OUTPUT_TOKENS = 12
# llama-server's n-gram drafting, as a mode's server flags
NGRAM_ARGS = [
    "--spec-type",
    "ngram-simple",
    "--spec-ngram-simple-size-n",
    "4",
    "--spec-ngram-simple-size-m",
    "16",
]
REPEATED = "The quick brown fox jumps over the lazy dog while the cat sleeps. " * 12


@pytest.fixture(scope="module")
def llama_server_binary() -> str:
    smoke = filled_config("smoke")
    build = load_engine("llama_cpp").build(smoke["engines"]["llama_cpp"], cache_root(""), 2)
    return build["binaries"]["llama-server"]["path"]


@pytest.fixture(scope="module")
def model_path() -> Path:
    return real_engine().model_path  # fetched here if no earlier test or run has


def openai_spec(binary: str) -> dict:
    argv = [binary, "--model", "{model}", "--host", "{host}", "--port", "{port}", "--threads", "{threads}",
            "--ctx-size", "{context_tokens}", "--parallel", "1", "--no-webui", "--metrics",
            "--no-cache-prompt"]  # fmt: skip
    return with_defaults({"engines": {"openai": {"kind": "openai", "argv": argv, "threads": 2}}})["engines"][
        "openai"
    ]


@pytest.fixture(scope="module")
def cold_series(tmp_path_factory, llama_server_binary, model_path):
    """Two cold shots (two fresh server processes) with n-gram drafting, through run_job."""
    tmp = tmp_path_factory.mktemp("openai")
    engine = load_engine("openai")
    build = engine.build(openai_spec(llama_server_binary), cache_root(""), 1)
    mode = NGRAM_ARGS
    spec = openai_spec(llama_server_binary)
    settings = ServerSettings(
        threads=2,
        context_tokens=512,
        extra_args=tuple(engine.speculative_args({"args": mode})),
        engine_spec=spec,
    )
    helper = engine.start(build, model_path, settings, tmp / "tokenize.log")
    try:
        ids = helper.tokenize(REPEATED)[:96]
    finally:
        helper.stop()
    job = Job(engine="openai", model="smollm2", prompt_tokens_requested=96, protocol="cold",
              context_tokens_requested=512, repeat=1, series_length=2, spec_mode="ngram")  # fmt: skip
    ctx = JobContext(
        job=job, engine=engine, build=build, model_path=model_path,
        model={"sha256": "test", "metadata": {"file_type": "Q4_1"}},
        prompts={"corpus": "repeated sentence", "prompts": {"96A": {"token_ids": ids}}},
        settings=settings, output_tokens=OUTPUT_TOKENS, shot_timeout_s=120, log_dir=tmp / "logs",
    )  # fmt: skip
    return run_job(ctx, JsonlJournal(tmp / "shots.jsonl"))


def test_cold_shots_are_shot_one_of_new_processes(cold_series):
    assert [r["status"] for r in cold_series] == ["ok", "ok"], [r["error"] for r in cold_series]
    assert [r["shot_index"] for r in cold_series] == [1, 1]
    assert len({r["process_id"] for r in cold_series}) == 2
    assert len({r["pid"] for r in cold_series}) == 2


def test_token_counts_agree_with_usage(cold_series):
    for record in cold_series:
        assert record["output_tokens"] == OUTPUT_TOKENS  # streamed chunks, checked against usage
        assert record["engine_output_tokens"] == OUTPUT_TOKENS
        assert record["engine_prompt_tokens"] == 96  # usage.prompt_tokens: the exact ids were sent
        assert len(record["output_token_ids"]) == OUTPUT_TOKENS
        assert record["decode_tok_s"] > 0 and record["ttft_s"] > 0


def test_metrics_deltas_match_the_servers_own_per_request_counts(cold_series):
    for record in cold_series:
        assert record["server_metrics_source"].startswith("llamacpp:spec_decode_num_draft_tokens_total")
        # llama-server's response timings count this request's drafts; the process-wide counters
        # moved by the same amount because nothing else ran between the two reads.
        assert record["server_spec_draft_tokens_delta"] == record["engine_draft_tokens"] > 0
        assert record["server_spec_accepted_tokens_delta"] == record["engine_draft_accepted"]
        assert record["server_spec_drafts_delta"] >= 1


def test_placeholders_are_replaced_inside_one_element_only():
    values = {"port": "8080", "host": "127.0.0.1"}
    assert substitute("--bind={host}:{port}", values) == "--bind=127.0.0.1:8080"
    assert (
        substitute('{"method": "ngram", "port": "{port}"}', values) == '{"method": "ngram", "port": "8080"}'
    )
    assert substitute("{unknown}", values) == "{unknown}"


def test_a_stream_that_disagrees_with_usage_fails_instead_of_guessing():
    # Two chunks but usage says five tokens: per-token arrival times are not known (e.g. vLLM
    # without return_token_ids sends several tokens per chunk under speculative decoding).
    events = [
        (1.0, {"choices": [{"text": "a", "finish_reason": None}]}),
        (2.0, {"choices": [{"text": "bcde", "finish_reason": "length"}]}),
        (2.1, {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}),
    ]
    with pytest.raises(MalformedStream, match="usage.completion_tokens = 5"):
        chunks_outcome(0.0, 2.2, events)
    events[1] = (2.0, {"choices": [{"text": "bcde", "token_ids": [7, 8, 9, 10], "finish_reason": "length"}]})
    events[0] = (1.0, {"choices": [{"text": "a", "token_ids": [6], "finish_reason": None}]})
    outcome = chunks_outcome(0.0, 2.2, events)
    assert outcome.token_events == [(1.0, 1), (2.0, 4)] and outcome.output_token_ids == [6, 7, 8, 9, 10]
    assert outcome.stop_reason == "limit" and outcome.prompt_tokens_engine == 3


def test_a_role_only_chunk_is_no_token_and_does_not_start_ttft():
    events = [
        (0.5, {"choices": [{"delta": {"role": "assistant", "content": None}, "finish_reason": None}]}),
        (1.0, {"choices": [{"delta": {"content": "Hi"}, "finish_reason": None}]}),
        (1.5, {"choices": [{"delta": {}, "finish_reason": "stop"}]}),
        (1.6, {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
    ]
    outcome = chunks_outcome(0.0, 2.0, events)
    assert outcome.token_events == [(1.0, 1)]  # the first token arrived at 1.0, not 0.5


def test_chat_against_llama_server_counts_every_token_of_multi_token_chunks(
    tmp_path, llama_server_binary, model_path
):
    """A real /v1/chat/completions stream whose emoji span several tokens per chunk."""
    spec = openai_spec(llama_server_binary)
    spec["api"] = "chat"
    engine = load_engine("openai")
    build = engine.build(spec, cache_root(""), 1)
    server = engine.start(
        build,
        model_path,
        ServerSettings(threads=2, context_tokens=512, engine_spec=spec),
        tmp_path / "chat.log",
    )
    try:
        ids = server.tokenize("Write two lines about the moon, each ending with the emoji 🌙🌙🌙.")
        outcome = server.shot(ShotRequest(ids, 24, ignore_eos=True, timeout_s=120))
    finally:
        server.stop()
    counts = [n for _t, n in outcome.token_events]
    assert sum(counts) == 24 == outcome.engine_timings["predicted_n"]
    assert max(counts) > 1, counts  # a chunk that completed a character carried several tokens
    assert outcome.stop_reason == "limit" and "🌙" in outcome.output_text
    assert outcome.engine_timings["cache_n"] == 0  # usage.prompt_tokens_details: nothing reused


def test_the_prompt_cache_state_comes_from_the_servers_own_flags():
    from engines.openai_compat import prompt_cache_state

    assert (
        prompt_cache_state(["vllm", "serve", "m", "--enable-prefix-caching"])
        == "on (--enable-prefix-caching)"
    )
    assert (
        prompt_cache_state(["llama-server", "--cache-prompt", "--no-cache-prompt"])
        == "off (--no-cache-prompt)"
    )
    assert prompt_cache_state(["sglang", "--disable-radix-cache"]) == "off (--disable-radix-cache)"
    assert prompt_cache_state(["tgi", "--port", "8080"]) == "not known"
