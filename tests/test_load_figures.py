"""Seed 000's chunk table and seed 002's concurrency figures on hand-made shots (issue 19): the
bytes one prefill moved are GPM's utilisation x the GPU's peak x the prefill's seconds (inferred,
resting on the vendor's peak), each chunk's speed is set against the largest chunk of the cells
equal on every other axis, and a CPU (no GPM) gets no bytes figure."""

import pandas as pd
import pytest

from tests.shot_tables import cell, series
from whichshot.figures.table import compute_figures

H200 = {"name": "NVIDIA H200 (SXM)", "bandwidth_bytes_s": 4.8e12, "compute_flop_s": 9.89e14, "source": "x"}
HARDWARE = {
    "host": {"cpu_model": "Test CPU"},
    "cpu": {"copy_bandwidth_bytes_s": 2e10, "copy_samples_s": [0.1], "copy_method": "copy",
            "gemm_flop_s": 4e11, "gemm_samples_s": [0.01], "gemm_method": "gemm"},
    "gpus": [{"uuid": "GPU-1", "name": "NVIDIA H200", "peaks": H200}],
}  # fmt: skip


def _chunk_run(gpm: bool = True) -> pd.DataFrame:
    rows = []
    for chunk, ttft_s, utilisation in ((512, 2.0, 40.0), (4096, 1.0, 60.0)):
        values = {"ttft_s": ttft_s, "prefill_tok_s": 8192 / ttft_s,
                  "prefill_dram_bw_util_median_pct": utilisation if gpm else None}  # fmt: skip
        rows += series(cell(prefill_chunk_tokens=chunk, prompt_tokens_requested=8192), [values] * 5,
                       telemetry_gpus="GPU-1")  # fmt: skip
    return pd.DataFrame(rows)


def _figures(shots: pd.DataFrame) -> dict[tuple, object]:
    figures, _ = compute_figures(shots, [], 0.7, [HARDWARE])
    return {(f.metric, f.axes.get("prefill_chunk_tokens")): f for f in figures if f.shot_index is None}


def test_bytes_per_prefill_rest_on_the_vendors_peak():
    found = _figures(_chunk_run())
    small, large = found[("prefill_dram_bytes", 512)], found[("prefill_dram_bytes", 4096)]
    assert small.value == pytest.approx(0.40 * 2.0 * 4.8e12) and large.value == pytest.approx(
        0.60 * 1.0 * 4.8e12
    )
    assert small.kind == "inferred" and small.unit == "B"
    peak = found[("gpu_peak_bandwidth_bytes_s", None)]
    assert small.input_figure_ids == [peak.figure_id] and peak.kind == "assumed"
    assert len(small.shot_ids) == 4  # the warm rule's shots of a 5-shot series


def test_each_chunk_is_set_against_the_largest_of_its_cells():
    found = _figures(_chunk_run())
    ratio = found[("prefill_tok_s_vs_largest_chunk", 512)]
    assert ratio.value == pytest.approx(0.5) and ratio.kind == "derived"
    assert ("prefill_tok_s_vs_largest_chunk", 4096) not in found  # the baseline is not set against itself
    assert ratio.baseline_cell_id.endswith("ub4096")


def test_without_gpm_no_bytes_are_made_up():
    found = _figures(_chunk_run(gpm=False))
    assert not [key for key in found if key[0] == "prefill_dram_bytes"]
    assert ("prefill_tok_s_vs_largest_chunk", 512) in found


def test_several_streams_are_set_against_one_and_show_their_capacity():
    one = series(cell(), [{"decode_tok_s": 40.0, "context_tokens_engine": 4096, "kv_cache_mib": 96.0}] * 5)
    streams = {"decode_tok_s": 30.0, "stream_decode_tok_s_mean": 31.0, "aggregate_decode_tok_s": 60.0,
               "stream_ttft_max_s": 0.2, "context_tokens_engine": 2048, "kv_cache_mib": 96.0}  # fmt: skip
    two = series(cell(parallel_streams=2), [streams] * 5)
    figures, _ = compute_figures(pd.DataFrame(one + two), [], 0.7)
    found = {(f.metric, f.axes.get("parallel_streams")): f for f in figures if f.shot_index is None}
    assert found[("aggregate_decode_vs_one_stream", 2)].value == pytest.approx(60.0 / 40.0)
    assert found[("stream_decode_vs_one_stream", 2)].value == pytest.approx(31.0 / 40.0)
    assert (
        found[("context_tokens_engine", 1)].value == 4096
        and found[("context_tokens_engine", 2)].value == 2048
    )
    assert ("aggregate_decode_vs_one_stream", 1) not in found
