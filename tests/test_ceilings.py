"""Physical ceilings (issue 18): a model's per-token costs from its GGUF against hand arithmetic
(dense with a separate output head, tied embeddings, mixture of experts), the ceiling and share
figures on a hand-made run, and the CPU probe's arithmetic."""

import json
import threading

import gguf
import numpy as np
import pandas as pd
import pytest

from tests.shot_tables import cell, series
from whichshot.figures.caveats.gates import struck_by
from whichshot.figures.table import compute_figures, write_figures_from_files
from whichshot.measure.hardware_probe import gpu_peaks, probe_cpu, probe_hardware
from whichshot.measure.kernel_probe import AFTER
from whichshot.prepare.model_traffic import model_traffic

LAYERS, EMBD, HEADS, KV_HEADS, VOCAB, FFN = 2, 16, 4, 2, 10, 8


def _write(path, tied: bool = False, experts: tuple[int, int] | None = None):
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(LAYERS)
    writer.add_embedding_length(EMBD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_feed_forward_length(FFN)
    if experts:
        writer.add_expert_count(experts[0])
        writer.add_expert_used_count(experts[1])
    tensors = {"token_embd.weight": (VOCAB, EMBD)}
    if not tied:
        tensors["output.weight"] = (VOCAB, EMBD)
    for layer in range(LAYERS):
        tensors[f"blk.{layer}.attn_q.weight"] = (EMBD, EMBD)
        tensors[f"blk.{layer}.attn_k.weight"] = (EMBD // 2, EMBD)
        if experts:
            tensors[f"blk.{layer}.ffn_up_exps.weight"] = (experts[0], FFN, EMBD)
        else:
            tensors[f"blk.{layer}.ffn_up.weight"] = (FFN, EMBD)
    for name, shape in tensors.items():
        writer.add_tensor(name, np.zeros(shape, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# Per layer: attn_q 16x16 + attn_k 8x16 = 384 parameters, + ffn_up 8x16 = 128 (dense).
PER_LAYER_ATTENTION, PER_LAYER_FFN = 16 * 16 + 8 * 16, 8 * 16


def test_a_dense_model_reads_every_weight_and_one_embedding_row(tmp_path):
    traffic = model_traffic(_write(tmp_path / "dense.gguf"))
    params = VOCAB * EMBD + EMBD + LAYERS * (PER_LAYER_ATTENTION + PER_LAYER_FFN)  # head + 1 row + layers
    assert traffic["active_parameters_per_token"] == pytest.approx(params)
    assert traffic["weight_bytes_per_token"] == pytest.approx(4 * params)  # f32
    # K and V per context token: layers x kv heads x (head dim 4 + 4) x 2 bytes (f16 cache)
    assert traffic["kv_bytes_per_context_token"] == LAYERS * KV_HEADS * (4 + 4) * 2
    assert traffic["attention_flops_per_context_token"] == 2 * LAYERS * HEADS * (4 + 4)
    assert traffic["tied_embeddings"] is False


def test_tied_embeddings_are_read_whole_as_the_output_head(tmp_path):
    traffic = model_traffic(_write(tmp_path / "tied.gguf", tied=True))
    params = VOCAB * EMBD + LAYERS * (PER_LAYER_ATTENTION + PER_LAYER_FFN)
    assert traffic["active_parameters_per_token"] == pytest.approx(params) and traffic["tied_embeddings"]


def test_a_mixture_of_experts_reads_only_the_experts_a_token_uses(tmp_path):
    traffic = model_traffic(_write(tmp_path / "moe.gguf", experts=(8, 2)))
    experts = LAYERS * 8 * PER_LAYER_FFN * 2 / 8
    params = VOCAB * EMBD + EMBD + LAYERS * PER_LAYER_ATTENTION + experts
    assert traffic["active_parameters_per_token"] == pytest.approx(params)
    assert (traffic["expert_count"], traffic["expert_used_count"]) == (8, 2)


HARDWARE = {
    "host": {"cpu_model": "Test CPU"},
    "cpu": {"copy_bandwidth_bytes_s": 2e10, "copy_samples_s": [0.2, 0.1], "copy_method": "copy",
            "gemm_flop_s": 4e11, "gemm_samples_s": [0.01, 0.02], "gemm_method": "gemm"},
    "gpus": [],
}  # fmt: skip
TRAFFIC = {"m": {"model": "m", "sha256": "ab" * 32, "weight_bytes_per_token": 1e8,
                 "kv_bytes_per_context_token": 1e4, "active_parameters_per_token": 1e8,
                 "attention_flops_per_context_token": 1e5, "rules": "test"}}  # fmt: skip


def test_every_cell_gets_inferred_ceilings_and_its_share_of_them():
    shots = series(cell(protocol="cold"), [{"decode_tok_s": 50.0, "prefill_tok_s": 900.0}] * 3)
    figures, _ = compute_figures(pd.DataFrame(shots), [], 0.7, [HARDWARE], TRAFFIC)
    by_metric = {f.metric: f for f in figures if f.shot_index is None}
    bandwidth = by_metric["cpu_copy_bandwidth_bytes_s"]
    assert bandwidth.kind == "measured" and bandwidth.value == pytest.approx(2e10)
    # 64-token prompts, 16 output tokens: mean context 64 + 8 = 72 tokens of KV cache.
    ceiling = by_metric["decode_ceiling_tok_s"]
    assert ceiling.value == pytest.approx(2e10 / (1e8 + 1e4 * 72)) and ceiling.kind == "inferred"
    assert by_metric["decode_share_of_ceiling"].value == pytest.approx(50.0 / ceiling.value)
    prefill = by_metric["prefill_ceiling_tok_s"]
    assert prefill.value == pytest.approx(4e11 / (2 * 1e8 + 1e5 * 32))
    assert by_metric["prefill_share_of_ceiling"].kind == "inferred"
    assert set(ceiling.input_figure_ids) >= {bandwidth.figure_id, "m/weight_bytes_per_token"}


def test_a_cell_of_another_machine_gets_no_ceiling_from_this_machines_probe():
    here = series(cell(protocol="cold"), [{"decode_tok_s": 50.0}] * 2, hostname="n1")
    there = series(cell(protocol="warm", model="m"), [{"decode_tok_s": 50.0}] * 3, hostname="n2")

    def ceiling_cells(host: str | None) -> list[str]:
        probe = {**HARDWARE, "host": {**HARDWARE["host"], "hostname": host}}
        figures, _ = compute_figures(pd.DataFrame(here + there), [], 0.7, [probe], TRAFFIC)
        return [f.cell_id for f in figures if f.metric == "decode_ceiling_tok_s"]

    assert len(ceiling_cells(None)) == 2  # a probe that names no host (an older one): every cell
    (only,) = ceiling_cells("n1")
    assert "cold" in only


def test_with_a_probe_per_node_each_nodes_cells_run_against_their_own_nodes_peaks():
    def probed_on(node: str, bandwidth: float) -> dict:
        cpu = {
            **HARDWARE["cpu"],
            "copy_bandwidth_bytes_s": bandwidth,
            "copy_samples_s": [2 * 256 * 2**20 / bandwidth],
        }
        return {
            **HARDWARE,
            "cpu": cpu,
            "host": {"cpu_model": "Test CPU", "hostname": node, "slurm_node": node},
            "node": node,
            "file": f"results/hardware/probe-{node}.json",
        }

    longer = cell(protocol="cold", prompt_tokens_requested=128)
    shots = [*series(cell(protocol="cold"), [{"decode_tok_s": 50.0}] * 2, hostname="n1"),
             *series(longer, [{"decode_tok_s": 50.0}] * 2, hostname="n2", prompt_tokens=128)]  # fmt: skip
    figures, _ = compute_figures(
        pd.DataFrame(shots), [], 0.7, [probed_on("n1", 2e10), probed_on("n2", 4e10)], TRAFFIC
    )
    peaks = {f.figure_id: f for f in figures if f.metric == "cpu_copy_bandwidth_bytes_s"}
    assert {i: f.value for i, f in peaks.items()} == {
        "on-n1/cpu_copy_bandwidth_bytes_s": pytest.approx(2e10),
        "on-n2/cpu_copy_bandwidth_bytes_s": pytest.approx(4e10),
    }
    assert peaks["on-n2/cpu_copy_bandwidth_bytes_s"].source_ids == [
        "hardware-probe:results/hardware/probe-n2.json"
    ]
    ceilings = {f.cell_id: f for f in figures if f.metric == "decode_ceiling_tok_s"}
    (on_n1,) = [f for cell_id, f in ceilings.items() if "/p64/" in cell_id]
    (on_n2,) = [f for cell_id, f in ceilings.items() if "/p128/" in cell_id]
    assert "on-n1/cpu_copy_bandwidth_bytes_s" in on_n1.input_figure_ids
    assert "on-n2/cpu_copy_bandwidth_bytes_s" in on_n2.input_figure_ids
    assert on_n2.value / on_n1.value == pytest.approx(2 * (1e8 + 1e4 * 72) / (1e8 + 1e4 * 136))


def test_node_probes_taken_outside_slurm_read_this_one_machine_once(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    probes = [probe_hardware(f"results/hardware/probe-{node}.json", node) for node in ("n1", "n2")]
    assert [(p["node"], p["file"]) for p in probes] == [
        (None, "results/hardware/probe-n1.json"),
        (None, "results/hardware/probe-n2.json"),
    ]  # not the nodes they were asked for: the machine that ran them
    here = {"hostname": probes[0]["host"]["hostname"]}
    shots = series(cell(protocol="cold"), [{"decode_tok_s": 50.0}] * 2, **here)
    figures, _ = compute_figures(pd.DataFrame(shots), [], 0.7, probes, TRAFFIC)
    (peak,) = [f for f in figures if f.metric == "cpu_copy_bandwidth_bytes_s"]
    assert peak.cell_id == "" and peak.source_ids == ["hardware-probe:results/hardware/probe-n1.json"]


def test_no_probe_no_ceiling():
    shots = series(cell(protocol="cold"), [{}] * 2)
    figures, _ = compute_figures(pd.DataFrame(shots), [], 0.7)
    assert not [f for f in figures if "ceiling" in f.metric]


def test_the_cpu_probe_reports_its_best_repetition_and_gpus_their_cited_peak():
    probe = probe_cpu()
    assert probe["copy_bandwidth_bytes_s"] == pytest.approx(
        2 * 256 * 1024 * 1024 / min(probe["copy_samples_s"])
    )
    assert probe["gemm_flop_s"] == pytest.approx(2 * 1024**3 / min(probe["gemm_samples_s"]))
    h200 = gpu_peaks("NVIDIA H200")
    assert h200["bandwidth_bytes_s"] == 4.8e12 and "datasheet" in h200["source"]
    assert gpu_peaks("Some Unknown GPU") is None
    assert gpu_peaks("NVIDIA H200 NVL")["name"] == "NVIDIA H200 NVL"  # the specific name wins
    assert gpu_peaks("NVIDIA GeForce RTX 3090 Ti")["bandwidth_bytes_s"] == 1.008e12
    json.dumps(probe)  # it goes into probe.json as it is


def test_a_gpu_cell_runs_against_our_probe_of_its_gpu_where_there_is_one():
    table = {
        "name": "NVIDIA H200 (SXM)",
        "bandwidth_bytes_s": 4.8e12,
        "compute_flop_s": 9.89e14,
        "source": "x",
    }
    measured = {"name": "NVIDIA H200", "copy_bandwidth_bytes_s": 4.3e12, "copy_samples_s": [0.002],
                "copy_method": "copy", "gemm_flop_s": 7.8e14, "gemm_samples_s": [0.0014],
                "gemm_method": "gemm"}  # fmt: skip
    gpu = {"uuid": "GPU-1", "name": "NVIDIA H200", "peaks": table}
    shots = pd.DataFrame(series(cell(protocol="cold"), [{"decode_tok_s": 50.0}] * 2, telemetry_gpus="GPU-1"))

    def ceiling(gpus):
        figures, _ = compute_figures(shots, [], 0.7, [{**HARDWARE, "gpus": gpus}], TRAFFIC)
        found = {f.metric: f for f in figures if f.shot_index is None}
        return found["decode_ceiling_tok_s"], found

    with_probe, found = ceiling([{**gpu, "measured": measured}])
    assert with_probe.value == pytest.approx(4.3e12 / (1e8 + 1e4 * 72))
    assert (
        found["gpu_copy_bandwidth_bytes_s"].kind == "measured"
        and found["gpu_peak_bandwidth_bytes_s"].kind == "assumed"
    )
    table_only, _ = ceiling([gpu])
    assert table_only.value == pytest.approx(4.8e12 / (1e8 + 1e4 * 72))


# Issue 33: ceilings that are upper bounds.
def test_prefill_parameters_leave_out_the_head_the_embedding_and_the_last_layers_ffn(tmp_path):
    for tied in (False, True):
        traffic = model_traffic(_write(tmp_path / f"tied-{tied}.gguf", tied=tied))
        # every layer's attention, every FFN but the last layer's (its rows reduce to the logits' token)
        params = LAYERS * PER_LAYER_ATTENTION + (LAYERS - 1) * PER_LAYER_FFN
        assert traffic["prefill_parameters_per_token"] == pytest.approx(params)
        assert traffic["active_parameters_per_token"] > params + VOCAB * EMBD - 1  # decode counts the head
        assert traffic["prefill_matrix_parameters_by_type"] == {"F32": pytest.approx(params)}


KERNELS = {"Q4_1": {"samples_s": [0.5, 0.25], "flops_per_run": 5e10},  # 200 GFLOP/s at best
           "Q6_K": {"samples_s": [0.2], "flops_per_run": 8e10}}  # 400 GFLOP/s  # fmt: skip


def _kernel_probe(weight_type: str) -> dict:
    return {"engine": "eng", "weight_type": weight_type, "build_id": "b1", "hostname": "h",
            "measured_at_unix_s": 0.0, "not_measured": None, "device": "cpu", "argv": ["llama-bench"],
            "method": "pp512", **KERNELS[weight_type]}  # fmt: skip


def _prefill(probe: dict, traffic: dict) -> dict:
    shots = series(cell(protocol="cold"), [{"decode_tok_s": 50.0, "prefill_tok_s": 900.0}] * 3)
    figures, caveats = compute_figures(pd.DataFrame(shots), [], 0.7, [probe], traffic)
    found = {f.metric: f for f in figures if f.shot_index is None}
    return found, {c["caveat_id"]: c for c in caveats}


MIXED = {"m": {**TRAFFIC["m"], "prefill_parameters_per_token": 6e7,
               "prefill_matrix_parameters_by_type": {"Q4_1": 3e7, "Q6_K": 3e7}}}  # fmt: skip


def test_the_prefill_ceiling_prefers_the_engines_kernels_at_the_models_weight_types():
    probe = {**HARDWARE, "engine_kernels": [_kernel_probe("Q4_1"), _kernel_probe("Q6_K")]}
    found, _ = _prefill(probe, MIXED)
    assert found["cpu_engine_matmul_q4_1_flop_s"].value == pytest.approx(2e11)
    assert found["cpu_engine_matmul_q4_1_flop_s"].kind == "measured"
    mixed = found["cpu_engine_matmul_flop_s"]  # half the work at 200, half at 400 GFLOP/s
    assert mixed.value == pytest.approx(6e7 / (3e7 / 2e11 + 3e7 / 4e11)) and mixed.kind == "derived"
    ceiling = found["prefill_ceiling_tok_s"]
    assert ceiling.value == pytest.approx(mixed.value / (2 * 6e7 + 1e5 * 32))  # no head: 6e7, not 1e8
    assert mixed.figure_id in ceiling.input_figure_ids and "m/prefill_parameters_per_token" in (
        ceiling.input_figure_ids
    )


def test_the_kernel_peak_is_the_faster_of_the_passes_before_and_after_the_grid(tmp_path):
    """A shared machine drifts: the pass after the grid, written as its own file, joins the probe
    of the same machine, and the faster pass of each type sets the ceiling."""
    slow_after = {**_kernel_probe("Q4_1"), "samples_s": [2.0], "bracket": AFTER}  # half the speed
    fast_after = {**_kernel_probe("Q6_K"), "samples_s": [0.1], "bracket": AFTER}  # twice the speed
    probe_path, after_path = tmp_path / "probe.json", tmp_path / "after" / "probe.json"
    after_path.parent.mkdir()
    probe_path.write_text(
        json.dumps({**HARDWARE, "engine_kernels": [_kernel_probe("Q4_1"), _kernel_probe("Q6_K")]})
    )
    after_path.write_text(json.dumps({"engine_kernels": [slow_after, fast_after]}))
    shots = tmp_path / "shots.parquet"
    pd.DataFrame(
        series(cell(protocol="cold"), [{"decode_tok_s": 50.0, "prefill_tok_s": 900.0}] * 3)
    ).to_parquet(shots)
    traffic = tmp_path / "traffic.json"
    traffic.write_text(json.dumps({**MIXED["m"], "model": "m"}))
    figures_path, caveats_path = tmp_path / "figures.parquet", tmp_path / "caveats.parquet"
    write_figures_from_files(
        shots, [], 0.7, figures_path, caveats_path, [probe_path], [traffic], [after_path]
    )
    figures = pd.read_parquet(figures_path).set_index("metric")
    assert figures.loc["cpu_engine_matmul_q4_1_flop_s", "value"] == pytest.approx(2e11)  # before: faster
    assert figures.loc["cpu_engine_matmul_q6_k_flop_s", "value"] == pytest.approx(8e11)  # after: faster
    assert (
        "of 2 pass(es) (this one after the grid)" in figures.loc["cpu_engine_matmul_q6_k_flop_s", "formula"]
    )
    assert figures.loc["cpu_engine_matmul_flop_s", "value"] == pytest.approx(6e7 / (3e7 / 2e11 + 3e7 / 8e11))


def test_without_every_type_measured_the_prefill_ceiling_falls_back_to_the_gemm():
    failed = {**_kernel_probe("Q6_K"), "not_measured": "llama-bench failed"}
    found, _ = _prefill({**HARDWARE, "engine_kernels": [_kernel_probe("Q4_1"), failed]}, MIXED)
    assert "cpu_engine_matmul_flop_s" not in found and "cpu_engine_matmul_q6_k_flop_s" not in found
    assert found["prefill_ceiling_tok_s"].value == pytest.approx(4e11 / (2 * 6e7 + 1e5 * 32))


def test_a_share_above_one_is_flagged_except_a_drafted_decodes():
    slow_peaks = {**HARDWARE, "cpu": {**HARDWARE["cpu"], "copy_bandwidth_bytes_s": 1e9,
                                      "copy_samples_s": [0.5], "gemm_flop_s": 1e10,
                                      "gemm_samples_s": [2.0]}}  # fmt: skip
    speeds = [{"decode_tok_s": 50.0, "prefill_tok_s": 900.0}] * 3
    for spec_mode, expected in (("none", {"decode_tok_s", "prefill_tok_s"}), ("ngram", {"prefill_tok_s"})):
        shots = series(cell(protocol="cold", spec_mode=spec_mode), speeds)
        figures, caveats = compute_figures(pd.DataFrame(shots), [], 0.7, [slow_peaks], TRAFFIC)
        shares = {f.metric: f for f in figures if f.metric.endswith("_share_of_ceiling")}
        assert shares["decode_share_of_ceiling"].value > 1 and shares["prefill_share_of_ceiling"].value > 1
        (caveat,) = [c for c in caveats if c["caveat_id"] == "share_above_ceiling"]
        assert set(caveat["columns"]) == expected
        flagged = {m for m, f in shares.items() if "share_above_ceiling" in f.caveat_ids}
        assert flagged == {f"{c.removesuffix('_tok_s')}_share_of_ceiling" for c in expected}
    within = series(cell(protocol="cold"), [{"decode_tok_s": 50.0, "prefill_tok_s": 900.0}] * 3)
    _, caveats = compute_figures(pd.DataFrame(within), [], 0.7, [HARDWARE], TRAFFIC)
    assert "share_above_ceiling" not in {c["caveat_id"] for c in caveats}


def test_the_copy_probe_splits_the_buffer_across_the_engines_threads(monkeypatch):
    calls: list[tuple[int, int]] = []  # (thread, bytes) of every copy
    real_copyto = np.copyto

    def copyto(target, source):
        calls.append((threading.get_ident(), target.nbytes))
        return real_copyto(target, source)

    monkeypatch.setattr(np, "copyto", copyto)
    probe = probe_cpu(threads=3)
    assert probe["copy_threads"] == 3 and "3 thread(s)" in probe["copy_method"]
    main, whole = threading.get_ident(), 256 * 1024 * 1024
    assert {size for thread, size in calls if thread == main} == {whole}  # the one-thread copies
    pool = [(thread, size) for thread, size in calls if thread != main]
    assert len(pool) == 3 * 5 and sum(size for _, size in pool) == 5 * whole  # thirds, every repeat
    assert max(size for _, size in pool) <= whole // 3 + 8
    assert len({thread for thread, _ in pool}) >= 2  # the pool's threads, not one after another
    assert probe["copy_bandwidth_bytes_s"] == pytest.approx(2 * whole / min(probe["copy_samples_s"]))
    assert probe["copy_one_thread_bandwidth_bytes_s"] == pytest.approx(
        2 * whole / min(probe["copy_one_thread_samples_s"])
    )


def test_a_shot_without_drafting_faster_than_its_decode_ceiling_strikes_the_decode_figures():
    """The ceiling here is 2e10 / (1e8 + 1e4 x 72) ~ 199 tok/s: one shot at 78,000 tok/s (a stream a
    proxy held back) is never a valid speed; the others and a drafted cell's are left alone."""
    speeds = [{"decode_tok_s": 50.0, "prefill_tok_s": 900.0}] * 2 + [{"decode_tok_s": 78000.0,
                                                                      "prefill_tok_s": 900.0}]  # fmt: skip
    shots = series(cell(protocol="cold"), speeds)
    figures, caveats = compute_figures(pd.DataFrame(shots), [], 0.7, [HARDWARE], TRAFFIC)
    (caveat,) = [c for c in caveats if c["caveat_id"] == "shot_above_decode_ceiling"]
    assert caveat["sentence"].startswith("1 shot(s) without drafting decoded faster than their cell's")
    decode = [f for f in figures if f.metric == "decode_tok_s" and f.shot_index is None]
    assert decode and all(g.caveat_id == "shot_above_decode_ceiling"
                          for f in decode for g in struck_by({"metric": f.metric,
                                                              "caveat_ids": f.caveat_ids}))  # fmt: skip
    assert all(struck_by({"metric": f.metric, "caveat_ids": f.caveat_ids}) for f in decode)
    prefill = [f for f in figures if f.metric == "prefill_tok_s" and f.shot_index is None]
    assert prefill and not any("shot_above_decode_ceiling" in f.caveat_ids for f in prefill)
    drafted = series(cell(protocol="cold", spec_mode="ngram"), speeds)
    _, caveats = compute_figures(pd.DataFrame(drafted), [], 0.7, [HARDWARE], TRAFFIC)
    assert "shot_above_decode_ceiling" not in {c["caveat_id"] for c in caveats}
