"""A GGUF file as the Hugging Face folder vLLM serves: run by engines.vllm with the engine's own Python
(`python -m engines.vllm_convert GGUF OUT --dtype bfloat16`), so the weights are dequantised by the
transformers that vLLM itself pins.

transformers reads the GGUF (`from_pretrained(gguf_file=...)`, every tensor dequantised), but
`save_pretrained` refuses a model loaded from GGUF blocks: the dense state dict is loaded into a model
made `from_config` and that one is saved (safetensors), with the tokenizer the GGUF carries. The
folder's manifest (each file's sha256) is printed as JSON on the last line.
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path


def convert(gguf: Path, out: Path, dtype: str) -> None:
    """Write the dense model and its tokenizer to `out` (an empty folder)."""
    import torch  # the engine's venv has them; the harness's need not
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"dtype": getattr(torch, dtype)}
    if hasattr(transformers, "GgufConfig"):  # newer transformers keep GGUF blocks packed unless told
        kwargs["quantization_config"] = transformers.GgufConfig(dequantize=True)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, **kwargs)
    dense = AutoModelForCausalLM.from_config(loaded.config, dtype=getattr(torch, dtype))
    missing, unexpected = dense.load_state_dict(loaded.state_dict(), strict=False)
    tied = set(getattr(dense, "_tied_weights_keys", None) or ())
    if unexpected or set(missing) - tied:
        raise SystemExit(
            f"{gguf.name}: weights do not fit the model: missing {missing}, unexpected {unexpected}"
        )
    dense.config.quantization_config = None
    dense.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)


def folder_manifest(folder: Path) -> dict[str, str]:
    """Each file of the folder (relative path) -> its sha256."""
    manifest = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
        manifest[str(path.relative_to(folder))] = digest.hexdigest()
    return manifest


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gguf", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    args = parser.parse_args(argv)
    convert(args.gguf, args.out, args.dtype)
    print(json.dumps(folder_manifest(args.out)))


if __name__ == "__main__":
    main(sys.argv[1:])
