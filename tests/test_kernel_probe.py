"""The engine-kernel compute probe (issue 33) for real: the synthetic model of a model's weight type
is valid ggml blocks of that type, and the real llama-bench loads it, runs it at the engine's
threads, and gives a peak the ceiling can use."""

import gguf
import pytest

from tests.fault_kit import real_engine
from tests.pipeline import load_config, run_pipeline
from whichshot.measure.kernel_probe import KERNEL_SHAPE, kernel_model, probe_engine_kernel
from whichshot.prepare.model_traffic import model_traffic

QUANTISED = ("Q4_1", "Q4_K", "Q6_K")


@pytest.mark.parametrize("weight_type", QUANTISED)
def test_a_kernel_model_holds_whole_blocks_of_its_type(tmp_path, weight_type):
    reader = gguf.GGUFReader(str(kernel_model(tmp_path, weight_type)))
    ggml_type = gguf.GGMLQuantizationType[weight_type]
    block, block_bytes = gguf.GGML_QUANT_SIZES[ggml_type]
    matrices = [t for t in reader.tensors if len(t.shape) > 1]
    assert matrices and {t.tensor_type for t in matrices} == {ggml_type}
    for tensor in matrices:
        assert tensor.n_bytes == tensor.n_elements // block * block_bytes
        assert set(tensor.data.tobytes()[:4096]) == {0x11}  # f16 fields read 0x1111: small, finite


@pytest.mark.e2e
def test_llama_bench_runs_the_kernel_model_of_the_models_weight_type(tmp_path):
    real = real_engine()
    traffic = model_traffic(real.model_path)
    by_type = traffic["prefill_matrix_parameters_by_type"]
    weight_type = max(by_type, key=by_type.get)
    assert weight_type == "Q4_1"  # SmolLM2-135M-Instruct.Q4_1
    spec = {"kind": "llama_cpp", "threads": 2}
    probe = probe_engine_kernel("llama_cpp", spec, real.build, weight_type, tmp_path)
    assert probe["not_measured"] is None, probe["not_measured"]
    assert probe["argv"][0] == real.build["binaries"]["llama-bench"]["path"] and probe["n_threads"] == 2
    assert probe["build_id"] == real.build["build_id"] and probe["device"] == "cpu"
    assert len(probe["samples_s"]) == 3 and all(s > 0 for s in probe["samples_s"])
    layers, hidden, ffn = KERNEL_SHAPE["layers"], KERNEL_SHAPE["hidden"], KERNEL_SHAPE["ffn"]
    matrices = layers * 4 * hidden * hidden + (layers - 1) * 3 * hidden * ffn  # last layer: no FFN per token
    assert probe["kernel_model"]["prefill_parameters_per_token"] == pytest.approx(matrices, rel=1e-3)
    peak = probe["flops_per_run"] / min(probe["samples_s"])
    assert 1e9 < peak < 1e13  # FLOP/s of two cores' integer kernels: neither nothing nor absurd
    assert traffic["prefill_parameters_per_token"] < traffic["active_parameters_per_token"]


def test_with_the_kernel_probe_off_the_hardware_probe_runs_and_the_second_pass_does_not(tmp_path):
    config = load_config("smoke")
    config["bench"]["kernel_probe"] = {"enabled": False}
    dry = run_pipeline(tmp_path, config, "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    planned = {line.split()[1].rstrip(":") for line in dry.stdout.splitlines() if line.startswith("rule ")}
    assert {"probe_hardware", "run_series", "compute_figures"} <= planned
    assert "probe_kernels_after" not in planned
