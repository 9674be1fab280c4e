"""Synthetic-weight models beyond F16 llama: Q8_0/Q4_0 blocks and the qwen3moe mixture of experts,
written tiny, read back, loaded and run by the real llama.cpp, costed per token, badly configured."""

import copy
from pathlib import Path

import gguf
import pytest
import yaml

from tests.fault_kit import real_engine, server_settings, token_ids
from whichshot.config import check_config
from whichshot.engine.base import ShotRequest
from whichshot.errors import WhichshotError
from whichshot.prepare.model_traffic import model_traffic
from whichshot.prepare.synthetic import SYNTHETIC_LABEL, write_synthetic_model

DEFAULT = yaml.safe_load((Path(__file__).parent.parent / "config" / "config.yaml").read_text())
DONOR = "smollm2_135m"
LLAMA = {"donor": DONOR, "arch": "llama", "hidden": 256, "layers": 2, "heads": 4, "kv_heads": 2,
         "ffn": 512, "seed": 0}  # fmt: skip
# head_dim x heads (512) differs from hidden (256), as in Qwen3-30B-A3B (4096 against 2048).
MOE = {"donor": DONOR, "arch": "qwen3moe", "weight_type": "Q4_0", "hidden": 256, "layers": 2, "heads": 8,
       "kv_heads": 2, "head_dim": 64, "ffn": 768, "experts": 8, "experts_used": 2, "expert_ffn": 128,
       "seed": 0}  # fmt: skip
SPECS = {
    "llama_q4_0": {**LLAMA, "weight_type": "Q4_0"},
    "llama_q8_0": {**LLAMA, "weight_type": "Q8_0"},
    "qwen3moe_q4_0": MOE,
}
BYTES_PER_WEIGHT = {"Q4_0": 18 / 32, "Q8_0": 34 / 32}  # f16 scale + 32 quants of 4 or 8 bits
F32 = gguf.GGMLQuantizationType.F32


class TinyModels:
    """Each tiny model, written on first use from SmolLM2's tokenizer (fetched if not cached), and
    its reader, parsed once (the tokenizer's fields take a second or two)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.readers: dict[str, gguf.GGUFReader] = {}

    def path(self, name: str) -> Path:
        path = self.directory / f"{name}.gguf"
        if not path.exists():
            write_synthetic_model(real_engine().model_path, path, SPECS[name], SPECS[name]["seed"])
        return path

    def reader(self, name: str) -> gguf.GGUFReader:
        if name not in self.readers:
            self.readers[name] = gguf.GGUFReader(str(self.path(name)))
        return self.readers[name]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> TinyModels:
    return TinyModels(tmp_path_factory.mktemp("synthetic"))


def _matrix_and_f32_elements(spec: dict, vocab: int) -> tuple[int, int]:
    """Weights in quantised matrices and in F32 tensors, counted from the shape alone."""
    hidden, layers = spec["hidden"], spec["layers"]
    dim = spec.get("head_dim", hidden // spec["heads"])
    q, kv = dim * spec["heads"], dim * spec["kv_heads"]
    attention = 2 * q * hidden + 2 * kv * hidden
    if spec["arch"] == "llama":
        per_layer, f32_per_layer = attention + 3 * spec["ffn"] * hidden, 2 * hidden
    else:
        per_layer = attention + 3 * spec["experts"] * spec["expert_ffn"] * hidden
        f32_per_layer = 2 * hidden + 2 * dim + spec["experts"] * hidden  # norms, q/k norms, router
    return 2 * vocab * hidden + layers * per_layer, hidden + layers * f32_per_layer


def _vocab(reader: gguf.GGUFReader) -> int:
    return len(reader.fields["tokenizer.ggml.tokens"].data)


@pytest.mark.e2e
@pytest.mark.parametrize("name", SPECS)
def test_llama_cpp_loads_the_model_and_generates(tiny, name, tmp_path):
    real = real_engine()
    server = real.engine.start(real.build, tiny.path(name), server_settings(), tmp_path / "engine.log")
    try:
        outcome = server.shot(ShotRequest(token_ids(24), 6, True, 60))
    finally:
        server.stop()
    assert len(outcome.output_token_ids) == 6
    log = (tmp_path / "engine.log").read_text(errors="replace")
    assert f"file type   = {SPECS[name]['weight_type']}" in log  # llama.cpp's own reading


@pytest.mark.parametrize("name", SPECS)
def test_tensors_read_back_with_their_type_shape_and_bytes(tiny, name):
    spec = SPECS[name]
    reader = tiny.reader(name)
    quant = gguf.GGMLQuantizationType[spec["weight_type"]]
    tensors = {t.name: t for t in reader.tensors}
    assert reader.fields["general.architecture"].contents() == spec["arch"]
    assert SYNTHETIC_LABEL in reader.fields["general.name"].contents()
    assert reader.fields["general.file_type"].contents() == gguf.LlamaFileType[f"MOSTLY_{quant.name}"]
    for tensor in tensors.values():
        matrix = len(tensor.shape) >= 2 and "ffn_gate_inp" not in tensor.name
        assert tensor.tensor_type == (quant if matrix else F32), tensor.name
        per_weight = BYTES_PER_WEIGHT[spec["weight_type"]] if matrix else 4
        assert int(tensor.n_bytes) == int(tensor.n_elements) * per_weight
    matrices, f32 = _matrix_and_f32_elements(spec, _vocab(reader))
    expected = matrices * BYTES_PER_WEIGHT[spec["weight_type"]] + f32 * 4
    assert sum(int(t.n_bytes) for t in tensors.values()) == expected
    tensor_bytes = tiny.path(name).stat().st_size - reader.data_offset
    assert expected <= tensor_bytes <= expected * 1.01  # only alignment padding besides


def test_qwen3moe_tensors_have_the_layout_llama_cpp_expects(tiny):
    reader = tiny.reader("qwen3moe_q4_0")
    shapes = {t.name: [int(d) for d in t.shape] for t in reader.tensors}  # ggml ne order
    hidden, dim, experts, ffn = MOE["hidden"], MOE["head_dim"], MOE["experts"], MOE["expert_ffn"]
    assert shapes["blk.1.attn_q.weight"] == [hidden, dim * MOE["heads"]]
    assert shapes["blk.1.attn_k.weight"] == [hidden, dim * MOE["kv_heads"]]
    assert shapes["blk.1.attn_output.weight"] == [dim * MOE["heads"], hidden]
    assert shapes["blk.1.attn_q_norm.weight"] == shapes["blk.1.attn_k_norm.weight"] == [dim]
    assert shapes["blk.1.ffn_gate_inp.weight"] == [hidden, experts]
    assert shapes["blk.1.ffn_gate_exps.weight"] == [hidden, ffn, experts]
    assert shapes["blk.1.ffn_up_exps.weight"] == [hidden, ffn, experts]
    assert shapes["blk.1.ffn_down_exps.weight"] == [ffn, hidden, experts]
    keys = {key: reader.fields[f"qwen3moe.{key}"].contents() for key in (
        "expert_count", "expert_used_count", "expert_feed_forward_length", "attention.key_length",
        "attention.value_length", "feed_forward_length")}  # fmt: skip
    assert keys == {"expert_count": experts, "expert_used_count": MOE["experts_used"],
                    "expert_feed_forward_length": ffn, "attention.key_length": dim,
                    "attention.value_length": dim, "feed_forward_length": MOE["ffn"]}  # fmt: skip


def test_model_traffic_reads_only_the_used_experts_share(tiny):
    traffic = model_traffic(tiny.path("qwen3moe_q4_0"))
    vocab = _vocab(tiny.reader("qwen3moe_q4_0"))
    matrices, f32 = _matrix_and_f32_elements(MOE, vocab)
    experts = MOE["layers"] * 3 * MOE["experts"] * MOE["expert_ffn"] * MOE["hidden"]
    # Every expert weight read at experts_used / experts; one row of the token embedding.
    embedding = vocab * MOE["hidden"]
    used = experts * MOE["experts_used"] / MOE["experts"]
    touched = (matrices - experts - embedding) + used + MOE["hidden"]
    assert traffic["weight_bytes_per_token"] == pytest.approx(touched * 18 / 32 + f32 * 4)
    assert traffic["active_parameters_per_token"] == pytest.approx(touched + f32)
    assert (traffic["expert_count"], traffic["expert_used_count"]) == (8, 2)
    assert traffic["key_length"] == traffic["value_length"] == MOE["head_dim"]


def _config_with(synthetic: dict) -> dict:
    config = copy.deepcopy(DEFAULT)
    config["models"]["synthetic_moe"] = {"measure": False, "synthetic": synthetic}
    return config


def test_a_good_qwen3moe_config_passes():
    check_config(_config_with(MOE))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"experts": None}, "models.synthetic_moe.synthetic: 'experts' is a required property"),
        ({"experts_used": 9}, "models.synthetic_moe.synthetic.experts_used: 9 is more than experts (8)"),
        ({"arch": "llama"}, "models.synthetic_moe.synthetic.experts: belongs to arch qwen3moe, not llama"),
        ({"weight_type": "Q5_0"}, "synthetic.weight_type: 'Q5_0' is not one of ['F16', 'Q8_0', 'Q4_0']"),
        ({"kv_heads": 3}, "synthetic.kv_heads: 3 does not divide heads (8)"),
        ({"expert_ffn": 100}, "ffn_down_exps rows of 100 weights are not whole Q4_0 blocks of 32"),
    ],
    ids=["no_experts", "too_many_used", "experts_on_llama", "unknown_type", "kv_heads", "part_blocks"],
)
def test_a_bad_synthetic_config_is_refused_in_one_line(change, expected):
    synthetic = {key: value for key, value in {**MOE, **change}.items() if value is not None}
    with pytest.raises(WhichshotError) as caught:
        check_config(_config_with(synthetic))
    message = str(caught.value)
    assert message.startswith("invalid config: ") and expected in message
    assert "\n" not in message
