"""What one token costs a model, from its GGUF file: the weight bytes read and parameters used per
generated token, the parameters multiplied per prompt token, the KV-cache bytes read per token of
context, and the attention FLOPs per token of context. These are the denominators of the physical
ceilings (figures/ceiling_figures.py).

Weights touched per token: every tensor of a dense model, except the token embedding when a
separate output head exists (then one row of it is read); with tied embeddings the embedding is
the output head and is read whole. Mixture-of-experts tensors (`*_exps`) count by the share of
experts a token uses (expert_used_count / expert_count). The KV cache is taken as f16 (llama.cpp's
default cache type; each shot records the engine's kv_cache_type) and every layer as attending to
the whole context (a sliding-window layer reads less: the ceiling is then a lower bound).
Parameters per prompt token (prefill) leave out the token embedding, the output head and the last
layer's feed-forward tensors: the embedding is a row lookup, and llama.cpp's graphs keep only the
rows that give logits (the last prompt token) after the last layer's attention, so neither that
layer's FFN nor the head runs for every prompt token. A generated token computes all of them, so
decode counts them.
"""

from pathlib import Path
from typing import Any

import gguf

from whichshot.errors import WhichshotError
from whichshot.prepare.models import gguf_field, open_gguf

KV_BYTES_PER_ELEMENT = 2  # f16 K and V
FLOPS_PER_MAC = 2
# No matrix product per prompt token: the embedding lookup and the logits (last prompt token only).
NOT_PER_PROMPT_TOKEN = frozenset({"token_embd.weight", "output.weight"})


def model_traffic(path: Path) -> dict[str, Any]:
    reader = open_gguf(path)
    arch = gguf_field(reader, "general.architecture")
    shape = _shape(reader, arch)
    tensors = [(t.name, int(t.n_elements), int(t.n_bytes), [int(d) for d in t.shape], t.tensor_type.name)
               for t in reader.tensors]  # fmt: skip
    names = {name for name, *_ in tensors}
    weight_bytes = active_params = prefill_params = 0.0
    prefill_types: dict[str, float] = {}  # ggml type -> its matrices' parameters per prompt token
    for name, elements, size, dims, ggml_type in tensors:
        share = _share(name, dims, "output.weight" in names, shape)
        weight_bytes += size * share
        active_params += elements * share
        if not _not_per_prompt_token(name, shape["block_count"]):
            prefill_params += elements * share
            if len(dims) > 1:  # a matrix: its kernel does the work
                prefill_types[ggml_type] = prefill_types.get(ggml_type, 0.0) + elements * share
    head_dims = shape["key_length"] + shape["value_length"]
    kv_heads, heads = (
        _per_layer(shape[key], shape["block_count"]) for key in ("head_count_kv", "head_count")
    )
    return {
        "architecture": arch,
        **shape,
        "weight_bytes_per_token": weight_bytes,
        "active_parameters_per_token": active_params,
        "prefill_parameters_per_token": prefill_params,
        "prefill_matrix_parameters_by_type": prefill_types,
        "kv_bytes_per_context_token": sum(kv_heads) * head_dims * KV_BYTES_PER_ELEMENT,
        "attention_flops_per_context_token": FLOPS_PER_MAC * sum(heads) * head_dims,
        "tied_embeddings": "output.weight" not in names,
        "rules": __doc__.split("\n\n", 1)[1].strip(),
    }  # fmt: skip


def _not_per_prompt_token(name: str, layers: int) -> bool:
    """Tensors a prompt's tokens other than its last do not multiply (see the rules above)."""
    return name in NOT_PER_PROMPT_TOKEN or name.startswith(f"blk.{layers - 1}.ffn_")


def _per_layer(count: int | list[int], layers: int) -> list[int]:
    """A head count per layer: GGUF gives one for every layer, or a list (0 = no attention there)."""
    return [int(c) for c in count] if isinstance(count, list) else [int(count)] * layers


def _share(name: str, dims: list[int], has_output_head: bool, shape: dict[str, Any]) -> float:
    """The share of a tensor one generated token reads."""
    if name == "token_embd.weight" and has_output_head:
        return 1 / dims[-1]  # one row of [n_embd, n_vocab]
    if "_exps" in name and shape["expert_count"]:
        return shape["expert_used_count"] / shape["expert_count"]
    return 1.0


def _shape(reader: gguf.GGUFReader, arch: str) -> dict[str, Any]:
    def get(key: str, default: Any = None) -> Any:
        value = gguf_field(reader, f"{arch}.{key}")
        return default if value is None else value

    heads = get("attention.head_count")
    embd = get("embedding_length")
    if heads is None or embd is None or get("block_count") is None:
        raise WhichshotError(f"{arch}: the GGUF does not give head_count, embedding_length and block_count")
    head_dim = embd // max(_per_layer(heads, 1))
    return {
        "block_count": get("block_count"),
        "embedding_length": embd,
        "head_count": heads,
        "head_count_kv": get("attention.head_count_kv", heads),
        "key_length": get("attention.key_length", head_dim),
        "value_length": get("attention.value_length", head_dim),
        "expert_count": get("expert_count", 0),
        "expert_used_count": get("expert_used_count", 0),
        "sliding_window": get("attention.sliding_window"),
    }
