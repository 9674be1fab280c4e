"""Synthetic-weight GGUF models: real shapes and a real tokenizer, random weights. Speed only.

Used where a model big enough to make prefill compute-bound for seconds (8B class) cannot be
shipped; every row and figure from such a model is labelled "synthetic weights: speed only".
"""

from pathlib import Path
from typing import Any

import gguf
import numpy as np

SYNTHETIC_LABEL = "synthetic weights: speed only"
_TOKENIZER_PREFIX = "tokenizer."


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


def write_synthetic_llama(donor_path: Path, out_path: Path, shape: dict[str, Any], seed: int) -> None:
    """A llama-architecture F16 GGUF of `shape` with the donor's tokenizer and seeded random weights."""
    donor = gguf.GGUFReader(str(donor_path))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(out_path.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), "llama")
    writer.add_name(f"synthetic llama {shape['hidden']}x{shape['layers']} ({SYNTHETIC_LABEL})")
    vocab = _copy_tokenizer(donor, writer)
    _add_hparams(writer, shape, vocab)
    rng = np.random.default_rng(seed)
    for name, tensor in _tensors(shape, vocab, rng):
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.rename(out_path)


def _add_hparams(writer: gguf.GGUFWriter, shape: dict[str, Any], vocab: int) -> None:
    writer.add_context_length(shape.get("context_length", 32768))
    writer.add_embedding_length(shape["hidden"])
    writer.add_block_count(shape["layers"])
    writer.add_feed_forward_length(shape["ffn"])
    writer.add_head_count(shape["heads"])
    writer.add_head_count_kv(shape["kv_heads"])
    writer.add_rope_dimension_count(shape["hidden"] // shape["heads"])
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)


def _tensors(shape: dict[str, Any], vocab: int, rng: np.random.Generator):
    # One random matrix per distinct shape, shared by every layer: the bytes read per token
    # (what speed depends on) are those of a real model; the content is irrelevant.
    hidden, ffn = shape["hidden"], shape["ffn"]
    kv = hidden // shape["heads"] * shape["kv_heads"]
    cache: dict[tuple[int, ...], np.ndarray] = {}

    def weights(*dims: int) -> np.ndarray:
        if dims not in cache:
            cache[dims] = (rng.standard_normal(dims, dtype=np.float32) * 0.02).astype(np.float16)
        return cache[dims]

    norm = np.ones(hidden, dtype=np.float32)
    yield "token_embd.weight", weights(vocab, hidden)
    for layer in range(shape["layers"]):
        prefix = f"blk.{layer}"
        yield f"{prefix}.attn_norm.weight", norm
        yield f"{prefix}.attn_q.weight", weights(hidden, hidden)
        yield f"{prefix}.attn_k.weight", weights(kv, hidden)
        yield f"{prefix}.attn_v.weight", weights(kv, hidden)
        yield f"{prefix}.attn_output.weight", weights(hidden, hidden)
        yield f"{prefix}.ffn_norm.weight", norm
        yield f"{prefix}.ffn_gate.weight", weights(ffn, hidden)
        yield f"{prefix}.ffn_up.weight", weights(ffn, hidden)
        yield f"{prefix}.ffn_down.weight", weights(hidden, ffn)
    yield "output_norm.weight", norm
    yield "output.weight", weights(vocab, hidden)
