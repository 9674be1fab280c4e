"""Synthetic-weight GGUF models: real shapes and a real tokenizer, random weights. Speed only.

Used where a model big enough to make prefill compute-bound for seconds (8B class), or a
mixture-of-experts model, cannot be shipped; every row and figure from such a model is labelled
"synthetic weights: speed only".

Two architectures as the pinned llama.cpp loads them: `llama` (dense) and `qwen3moe` (Qwen3's
mixture of experts: per-head q/k norms, a router and 3-D expert tensors). Weight matrices are F16
or raw Q8_0/Q4_0 blocks; norms and the expert router stay F32 as llama-quantize leaves them. One
random matrix per distinct shape and type is shared by every layer: the bytes read per token (what
speed depends on) are those of a real model, the content is irrelevant, and writing a 17 GB file
takes as long as the disk does.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from whichshot.errors import invalid_config

SYNTHETIC_LABEL = "synthetic weights: speed only"
_TOKENIZER_PREFIX = "tokenizer."
F16_STD = 0.02  # spread of F16 weights, as a trained model's
# A fixed block scale: every quantised weight is (q - 8) * 0.004 (Q4_0) or q * 0.00025 (Q8_0), so
# bounded (|w| <= 0.032) with a spread (~0.019) close to the F16 weights'.
BLOCK_SCALES = {"Q4_0": 0.004, "Q8_0": 0.00025}
FILE_TYPES = {
    "F16": gguf.LlamaFileType.MOSTLY_F16,
    "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
}
# What each architecture sets that the config does not: (rope freq base, RMS norm epsilon), as
# Llama 3 and Qwen3 have them.
ARCH_CONSTANTS = {"llama": (500000.0, 1e-5), "qwen3moe": (1000000.0, 1e-6)}
MOE_KEYS = ("experts", "experts_used", "expert_ffn", "head_dim")  # given with arch qwen3moe only
MATRIX, ROUTER, NORM = "matrix", "router", "norm"  # weight_type / F32 random / F32 ones
# A kernel model's matrices: every byte 0x11. Each f16 field of any ggml block then reads 0x1111
# (~4.9e-4), an f32 field ~1.1e-28 and every quant a small index: valid blocks of every type, and
# finite products. Speed only; no tokenizer (llama.cpp's "no_vocab" with dummy tokens).
KERNEL_FILL_BYTE = 0x11
KERNEL_VOCAB = 256


@dataclass(frozen=True)
class PlannedTensor:
    """One tensor of the file: its name, numpy shape (ggml's ne reversed) and content kind."""

    name: str
    dims: tuple[int, ...]
    kind: str


def write_synthetic_model(donor_path: Path, out_path: Path, spec: dict[str, Any], seed: int) -> None:
    """A GGUF of the `synthetic` config entry `spec` (with the schema's defaults filled: arch,
    weight_type, shape) with the donor's tokenizer and seeded random weights; written beside
    `out_path` and renamed into place."""
    donor = gguf.GGUFReader(str(donor_path))
    arch = spec["arch"]
    weight_type = spec["weight_type"]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(out_path.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), arch)
    writer.add_name(f"synthetic {arch} {spec['hidden']}x{spec['layers']} ({SYNTHETIC_LABEL})")
    vocab = _copy_tokenizer(donor, writer)
    _add_hparams(writer, spec, vocab)
    writer.add_file_type(FILE_TYPES[weight_type])
    _add_tensors(writer, plan_tensors(spec, vocab), weight_type, np.random.default_rng(seed))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.rename(out_path)


def write_kernel_model(out_path: Path, weight_type: str, spec: dict[str, Any]) -> None:
    """A llama-arch GGUF of shape `spec` (hidden, ffn, heads, kv_heads, layers) whose every matrix is
    constant bytes of ggml type `weight_type` (any type gguf knows: Q4_1, Q4_K, Q6_K...), to time
    the engine's kernels of that type; written beside `out_path` and renamed into place."""
    ggml_type = gguf.GGMLQuantizationType[weight_type]
    spec = {**spec, "arch": "llama"}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(out_path.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), "llama")
    writer.add_name(f"kernel model {weight_type} {spec['hidden']}x{spec['layers']} ({SYNTHETIC_LABEL})")
    writer.add_tokenizer_model("no_vocab")
    _add_hparams(writer, spec, KERNEL_VOCAB)
    constant: dict[tuple[int, ...], np.ndarray] = {}
    for tensor in plan_tensors(spec, KERNEL_VOCAB):
        if tensor.kind != MATRIX:
            writer.add_tensor(tensor.name, np.ones(tensor.dims, dtype=np.float32))  # the norms
            continue
        if tensor.dims not in constant:
            constant[tensor.dims] = _constant_blocks(ggml_type, tensor.dims)
        writer.add_tensor(tensor.name, constant[tensor.dims], raw_dtype=ggml_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.rename(out_path)


def _constant_blocks(ggml_type: gguf.GGMLQuantizationType, dims: tuple[int, ...]) -> np.ndarray:
    block_size, block_bytes = gguf.GGML_QUANT_SIZES[ggml_type]
    if dims[-1] % block_size:
        raise ValueError(f"rows of {dims[-1]} are not whole {ggml_type.name} blocks of {block_size}")
    return np.full((*dims[:-1], dims[-1] // block_size * block_bytes), KERNEL_FILL_BYTE, dtype=np.uint8)


def check_synthetic_shape(where: str, spec: dict[str, Any]) -> None:
    """Refuse (one line) what the schema cannot say of a `synthetic` entry (its defaults filled)."""
    _check_arch_keys(where, spec)
    _check_heads(where, spec)
    _check_whole_blocks(where, spec)


def _check_arch_keys(where: str, spec: dict[str, Any]) -> None:
    moe_only = [key for key in MOE_KEYS if key in spec]
    if spec["arch"] != "qwen3moe" and moe_only:
        raise invalid_config(f"{where}.{moe_only[0]}", f"belongs to arch qwen3moe, not {spec['arch']}")
    if "experts" in spec and spec["experts_used"] > spec["experts"]:
        raise invalid_config(
            f"{where}.experts_used", f"{spec['experts_used']} is more than experts ({spec['experts']})"
        )


def _check_heads(where: str, spec: dict[str, Any]) -> None:
    if spec["heads"] % spec["kv_heads"]:
        raise invalid_config(
            f"{where}.kv_heads", f"{spec['kv_heads']} does not divide heads ({spec['heads']})"
        )
    if "head_dim" not in spec and spec["hidden"] % spec["heads"]:
        raise invalid_config(f"{where}.heads", f"{spec['heads']} does not divide hidden ({spec['hidden']})")


def _check_whole_blocks(where: str, spec: dict[str, Any]) -> None:
    """Each row (ggml's ne0) of a quantised matrix must be a whole number of blocks."""
    if spec["weight_type"] not in BLOCK_SCALES:
        return
    block = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[spec["weight_type"]]][0]
    for tensor in _layer_tensors(spec, 0):
        if tensor.kind == MATRIX and tensor.dims[-1] % block:
            name = tensor.name.removeprefix("blk.0.").removesuffix(".weight")
            raise invalid_config(
                where,
                f"{name} rows of {tensor.dims[-1]} weights are not whole {spec['weight_type']} blocks of "
                f"{block}: make hidden, ffn, expert_ffn and heads x head_dim multiples of {block}",
            )


def random_matrix(weight_type: str, dims: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Seeded random weights of numpy shape `dims` in `weight_type`: F16 values, or for a quantised
    type its raw GGML blocks (uint8, the last axis in bytes): a fixed f16 scale, then random quants."""
    if weight_type == "F16":
        return (rng.standard_normal(dims, dtype=np.float32) * F16_STD).astype(np.float16)
    block_size, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[weight_type]]
    blocks = rng.integers(0, 256, size=(*dims[:-1], dims[-1] // block_size, block_bytes), dtype=np.uint8)
    blocks[..., :2] = np.frombuffer(np.float16(BLOCK_SCALES[weight_type]).tobytes(), dtype=np.uint8)
    return blocks.reshape(*dims[:-1], -1)


def head_dim(spec: dict[str, Any]) -> int:
    """Dimensions per attention head: as given, else hidden / heads."""
    return spec.get("head_dim", spec["hidden"] // spec["heads"])


def plan_tensors(spec: dict[str, Any], vocab: int) -> Iterator[PlannedTensor]:
    """Every tensor of the file, in file order."""
    hidden = spec["hidden"]
    yield PlannedTensor("token_embd.weight", (vocab, hidden), MATRIX)
    for layer in range(spec["layers"]):
        yield from _layer_tensors(spec, layer)
    yield PlannedTensor("output_norm.weight", (hidden,), NORM)
    yield PlannedTensor("output.weight", (vocab, hidden), MATRIX)


def _layer_tensors(spec: dict[str, Any], layer: int) -> list[PlannedTensor]:
    hidden, dim = spec["hidden"], head_dim(spec)
    q, kv = dim * spec["heads"], dim * spec["kv_heads"]
    tensors = [
        ("attn_norm", (hidden,), NORM),
        ("attn_q", (q, hidden), MATRIX),
        ("attn_k", (kv, hidden), MATRIX),
        ("attn_v", (kv, hidden), MATRIX),
        ("attn_output", (hidden, q), MATRIX),
        *(_dense_mlp(spec) if spec["arch"] == "llama" else _moe_mlp(spec)),
    ]
    return [PlannedTensor(f"blk.{layer}.{name}.weight", dims, kind) for name, dims, kind in tensors]


def _dense_mlp(spec: dict[str, Any]) -> list[tuple[str, tuple[int, ...], str]]:
    hidden, ffn = spec["hidden"], spec["ffn"]
    return [
        ("ffn_norm", (hidden,), NORM),
        ("ffn_gate", (ffn, hidden), MATRIX),
        ("ffn_up", (ffn, hidden), MATRIX),
        ("ffn_down", (hidden, ffn), MATRIX),
    ]


def _moe_mlp(spec: dict[str, Any]) -> list[tuple[str, tuple[int, ...], str]]:
    """Qwen3's per-head q/k norms, the router, and every expert's gate/up/down in one 3-D tensor."""
    hidden, dim, experts, ffn = spec["hidden"], head_dim(spec), spec["experts"], spec["expert_ffn"]
    return [
        ("attn_q_norm", (dim,), NORM),
        ("attn_k_norm", (dim,), NORM),
        ("ffn_norm", (hidden,), NORM),
        ("ffn_gate_inp", (experts, hidden), ROUTER),
        ("ffn_gate_exps", (experts, ffn, hidden), MATRIX),
        ("ffn_up_exps", (experts, ffn, hidden), MATRIX),
        ("ffn_down_exps", (experts, hidden, ffn), MATRIX),
    ]


def _add_tensors(
    writer: gguf.GGUFWriter, tensors: Iterator[PlannedTensor], weight_type: str, rng: np.random.Generator
) -> None:
    # Drawn in file order at the first use of each (kind, shape), so a seed always gives one file.
    cache: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}
    quantised = weight_type in BLOCK_SCALES
    for tensor in tensors:
        key = (tensor.kind, tensor.dims)
        if key not in cache:
            cache[key] = _content(tensor, weight_type, rng)
        raw_dtype = gguf.GGMLQuantizationType[weight_type] if quantised and tensor.kind == MATRIX else None
        writer.add_tensor(tensor.name, cache[key], raw_dtype=raw_dtype)


def _content(tensor: PlannedTensor, weight_type: str, rng: np.random.Generator) -> np.ndarray:
    if tensor.kind == NORM:
        return np.ones(tensor.dims, dtype=np.float32)
    if tensor.kind == ROUTER:
        return rng.standard_normal(tensor.dims, dtype=np.float32) * F16_STD
    return random_matrix(weight_type, tensor.dims, rng)


def _copy_tokenizer(donor: gguf.GGUFReader, writer: gguf.GGUFWriter) -> int:
    """Copy every tokenizer.* key of the donor; return its vocabulary size."""
    for key, field in donor.fields.items():
        if not key.startswith(_TOKENIZER_PREFIX):
            continue
        value_type = field.types[0]
        value = field.contents()
        if value_type == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(key, value, value_type, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, value, value_type)
    return len(donor.fields["tokenizer.ggml.tokens"].data)


def _add_hparams(writer: gguf.GGUFWriter, spec: dict[str, Any], vocab: int) -> None:
    arch = spec["arch"]
    rope_base, rms_eps = ARCH_CONSTANTS[arch]
    writer.add_context_length(spec.get("context_length", 32768))
    writer.add_embedding_length(spec["hidden"])
    writer.add_block_count(spec["layers"])
    writer.add_feed_forward_length(spec["ffn"])
    writer.add_head_count(spec["heads"])
    writer.add_head_count_kv(spec["kv_heads"])
    if arch == "llama":
        writer.add_rope_dimension_count(head_dim(spec))
    else:
        writer.add_key_length(head_dim(spec))
        writer.add_value_length(head_dim(spec))
        writer.add_expert_count(spec["experts"])
        writer.add_expert_used_count(spec["experts_used"])
        writer.add_expert_feed_forward_length(spec["expert_ffn"])
    writer.add_rope_freq_base(rope_base)
    writer.add_layer_norm_rms_eps(rms_eps)
    writer.add_vocab_size(vocab)
