"""The engine-log parser on lines llama-server (vendored build 11312) printed on this machine."""
# ruff: noqa: E501 -- log lines are kept exactly as the engine printed them

import sys
import threading

from engines.llama_log import LogReader, draft_mean_length, kv_cache_facts, startup_log, warmup_run
from whichshot.engine.base import NO_WARMUP, ONE_DECODE
from whichshot.engine.process import EngineProcess

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


# SmolLM2-135M on build 11312, as started by the harness (--log-verbosity 4), from its KV cache's size
# line to "model loaded": with its default warm-up, and with --no-warmup.
WARMUP_ON_START = """\
0.00.689.576 I llama_kv_cache: size =   11.25 MiB (   512 cells,  30 layers,  1/1 seqs), K (f16):    5.62 MiB, V (f16):    5.62 MiB
0.00.694.494 I llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = 64
0.00.694.515 I llama_kv_cache: attn_rot_v = 0, n_embd_head_k_all = 64
0.00.694.544 I sched_reserve: reserving ...
0.00.695.656 I resolve_fused_ops: Flash Attention enabled
0.00.695.694 I resolve_fused_ops: resolving fused DeepSeek V4 HC support:
0.00.696.249 I resolve_fused_ops: fused DeepSeek V4 HC pre enabled
0.00.696.778 I resolve_fused_ops: fused DeepSeek V4 HC comb enabled
0.00.699.073 I resolve_fused_ops: fused DeepSeek V4 HC post enabled
0.00.701.159 I sched_reserve:        CPU compute buffer size =    14.01 MiB
0.00.706.513 I sched_reserve: graph: nodes = 936, splits = 1, input objects = 4, input tensors = 6
0.00.706.539 I sched_reserve: reserve took 11.97 ms, sched copies = 1
0.00.706.600 I cmn          init: llama threadpool init, n_threads = 1
0.00.706.631 I cmn  common_init_: warming up the model with an empty run - please wait ... (--no-warmup to disable)
0.00.807.190 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 512, kv_unified = 'false'
0.00.810.498 I spec common_specu: no implementations specified for speculative decoding
0.00.810.518 I slot   load_model: id  0 | task -1 | new slot, n_ctx = 512
0.00.810.543 I srv    load_model: prompt cache is enabled, size limit: 8192 MiB
0.00.810.558 I srv    load_model: use `--cache-ram 0` to disable the prompt cache
0.00.810.573 I srv    load_model: for more info see https://github.com/ggml-org/llama.cpp/pull/16391
0.00.810.587 I srv    load_model: context checkpoints enabled, max = 32, min spacing = 8192
0.00.810.627 I srv          init: idle slots will be saved to prompt cache upon starting a new task
0.00.813.660 I srv          init: init: chat template, example_format: '<|im_start|>system
You are a helpful assistant<|im_end|>
<|im_start|>user
Hello<|im_end|>
<|im_start|>assistant
Hi there<|im_end|>
<|im_start|>user
How are you?<|im_end|>
<|im_start|>assistant
'
0.00.820.061 I srv          init: init: chat template, thinking = 0
0.00.820.118 I srv          init: preserve_reasoning kwarg: not supported by template
0.00.820.153 I srv  llama_server: model loaded
"""
WARMUP_OFF_START = """\
0.00.758.247 I llama_kv_cache: size =   11.25 MiB (   512 cells,  30 layers,  1/1 seqs), K (f16):    5.62 MiB, V (f16):    5.62 MiB
0.00.760.667 I llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = 64
0.00.760.686 I llama_kv_cache: attn_rot_v = 0, n_embd_head_k_all = 64
0.00.760.713 I sched_reserve: reserving ...
0.00.763.945 I resolve_fused_ops: Flash Attention enabled
0.00.763.982 I resolve_fused_ops: resolving fused DeepSeek V4 HC support:
0.00.768.718 I resolve_fused_ops: fused DeepSeek V4 HC pre enabled
0.00.769.361 I resolve_fused_ops: fused DeepSeek V4 HC comb enabled
0.00.769.825 I resolve_fused_ops: fused DeepSeek V4 HC post enabled
0.00.771.620 I sched_reserve:        CPU compute buffer size =    14.01 MiB
0.00.771.654 I sched_reserve: graph: nodes = 936, splits = 1, input objects = 4, input tensors = 6
0.00.771.672 I sched_reserve: reserve took 10.94 ms, sched copies = 1
0.00.771.847 I cmn          init: llama threadpool init, n_threads = 1
0.00.825.163 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 512, kv_unified = 'false'
0.00.825.233 I spec common_specu: no implementations specified for speculative decoding
0.00.825.252 I slot   load_model: id  0 | task -1 | new slot, n_ctx = 512
0.00.825.278 I srv    load_model: prompt cache is enabled, size limit: 8192 MiB
0.00.825.296 I srv    load_model: use `--cache-ram 0` to disable the prompt cache
0.00.825.314 I srv    load_model: for more info see https://github.com/ggml-org/llama.cpp/pull/16391
0.00.825.332 I srv    load_model: context checkpoints enabled, max = 32, min spacing = 8192
0.00.825.368 I srv          init: idle slots will be saved to prompt cache upon starting a new task
0.00.828.433 I srv          init: init: chat template, example_format: '<|im_start|>system
You are a helpful assistant<|im_end|>
<|im_start|>user
Hello<|im_end|>
<|im_start|>assistant
Hi there<|im_end|>
<|im_start|>user
How are you?<|im_end|>
<|im_start|>assistant
'
0.00.834.186 I srv          init: init: chat template, thinking = 0
0.00.834.236 I srv          init: preserve_reasoning kwarg: not supported by template
0.00.834.271 I srv  llama_server: model loaded
"""


def test_the_warm_up_is_read_from_the_log_not_the_flags():
    assert warmup_run(WARMUP_ON_START) == ONE_DECODE
    assert warmup_run(WARMUP_OFF_START) == NO_WARMUP


def test_a_log_that_cannot_show_a_warm_up_says_nothing():
    info_only = "\n".join(line for line in WARMUP_OFF_START.splitlines() if "llama_kv_cache" not in line)
    assert warmup_run(info_only) is None  # --log-verbosity 3 hides the warm-up line and the KV size alike
    cut_short = WARMUP_OFF_START.partition("srv    load_model")[0]
    assert warmup_run(cut_short) is None  # it may yet warm up: it did not get past that point


def test_the_start_up_log_is_read_on_to_model_loaded(tmp_path):
    log = tmp_path / "engine.log"
    kv_line, warmup_line, rest = WARMUP_ON_START.partition("0.00.706.631 I cmn  common_init_: warming")
    log.write_text(kv_line)  # the log thread lags: the warm-up line comes a moment later

    def write_the_rest() -> None:
        with open(log, "a") as handle:
            handle.write(warmup_line + rest)

    later = threading.Timer(0.3, write_the_rest)
    later.start()
    try:
        assert warmup_run(startup_log(LogReader(log))) == ONE_DECODE
    finally:
        later.join()


def test_a_rerun_reads_its_own_process_lines_not_an_earlier_ones(tmp_path):
    log = tmp_path / "process0.log"
    log.write_text(WARMUP_ON_START)  # an earlier attempt of the same process, warmed up
    rerun = EngineProcess([sys.executable, "-c", f"import sys; sys.stdout.write({WARMUP_OFF_START!r})"], log)
    rerun.popen.wait(timeout=30)
    rerun.stop()
    assert rerun.log_offset == len(WARMUP_ON_START.encode())
    assert warmup_run(startup_log(LogReader(log, rerun.log_offset))) == NO_WARMUP
