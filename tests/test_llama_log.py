"""The engine-log parser on lines llama-server (vendored build 11312) printed on this machine."""
# ruff: noqa: E501 -- log lines are kept exactly as the engine printed them

from whichshot.engines.llama_log import LogReader, draft_mean_length, kv_cache_facts

# Gemma 3 270M: a full cache and a sliding-window cache, each with its own size line.
GEMMA_START = """\
0.14.500.172 I llama_kv_cache_iswa: creating non-SWA KV cache, size = 2048 cells
0.14.500.220 I llama_kv_cache:        CPU KV buffer size =     6.00 MiB
0.14.503.250 I llama_kv_cache: size =    6.00 MiB (  2048 cells,   3 layers,  1/1 seqs), K (f16):    3.00 MiB, V (f16):    3.00 MiB
0.14.503.364 I llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells
0.14.579.626 I llama_kv_cache: size =   15.00 MiB (  1024 cells,  15 layers,  1/1 seqs), K (f16):    7.50 MiB, V (f16):    7.50 MiB
"""
# The order llama-server prints a drafted request's lines in: total time first, drafts last.
DRAFTED = """\
0.29.590.410 I slot print_timing: id  0 | task 0 |       total time =     484.10 ms /     5 tokens
0.29.590.421 I slot print_timing: id  0 | task 0 | draft acceptance = 0.76923 (   40 accepted /    52 generated), mean len = 11.00
"""


def test_kv_cache_is_summed_over_caches():
    assert kv_cache_facts(GEMMA_START) == {
        "kv_cache_mib": 21.0,
        "kv_cache_cells": 2048,
        "kv_cache_type": "K f16/V f16",
    }


def test_missing_kv_line_is_not_measured():
    assert kv_cache_facts("0.01 I srv llama_server: model loaded\n")["kv_cache_mib"] is None


def test_draft_mean_length_only_where_printed():
    assert draft_mean_length(DRAFTED, 40, 52) == 11.0
    padded = (
        "id  0 | task 0 | draft acceptance = 0.79688 (   51 accepted /    64 generated), mean len =  8.29"
    )
    assert draft_mean_length(padded, 51, 64) == 8.29
    assert draft_mean_length("prompt eval time = 1 ms / 1 tokens\n", 51, 64) is None


def test_reader_continues_where_it_stopped(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text(GEMMA_START)
    reader = LogReader(log)
    assert "SWA KV cache" in reader.read_until("llama_kv_cache: size")
    with open(log, "a") as handle:
        handle.write(DRAFTED)
    text = reader.read_until("draft acceptance =", timeout_s=0.2)
    assert "kv_cache" not in text and draft_mean_length(text, 40, 52) == 11.0
    assert reader.read_until("total time =", timeout_s=0.05) == ""


def test_a_line_of_another_request_is_not_this_requests_mean_length():
    # a failed shot left its line in the log; this request drafted other counts
    assert draft_mean_length(DRAFTED, 41, 60) is None
