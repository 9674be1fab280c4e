"""The model folder vLLM serves: a GGUF file converted once (engines/vllm_convert.py, run by the engine's
own Python) and kept in the whichshot cache under the file's sha256, the conversion code, the dtype and
the versions that convert it; its manifest (each file's sha256) and that manifest's sha256 beside it."""

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from whichshot.atomic import write_json_atomic
from whichshot.cache import exclusive_lock
from whichshot.engine.process import run_tied
from whichshot.errors import WhichshotError
from whichshot.hashing import sha256_file, short_id

CONVERTER = Path(__file__).with_name("vllm_convert.py")
PACKAGE_ROOT = CONVERTER.parents[1]
RECORD = "conversion.json"
# The distributions whose code reads the GGUF and writes the safetensors.
CONVERTING = ("torch", "transformers", "gguf", "safetensors")
CONVERT_TIMEOUT_S = 3600.0


def served_model(build: dict[str, Any], gguf: Path, dtype: str, log_path: Path) -> dict[str, Any]:
    """The converted folder of `gguf` (converting it now if the cache has none): its record."""
    source_sha256 = sha256_file(gguf)
    versions = {d["name"]: d["version"] for d in build["lock"] if d["name"] in CONVERTING}
    key = {
        "source_sha256": source_sha256,
        "code": sha256_file(CONVERTER),
        "dtype": dtype,
        "versions": versions,
    }
    home = Path(build["home"]).parents[1] / "converted" / f"{source_sha256[:16]}-{short_id(key)}"
    with exclusive_lock(home.with_name(home.name + ".lock")):
        if (home / RECORD).is_file():
            return json.loads((home / RECORD).read_text())
        return _convert(build, gguf, home, key, log_path)


def _convert(
    build: dict[str, Any], gguf: Path, home: Path, key: dict[str, Any], log_path: Path
) -> dict[str, Any]:
    started = time.monotonic()
    home.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{home.name}-", dir=home.parent))
    try:
        argv = [
            build["python"],
            "-m",
            "engines.vllm_convert",
            str(gguf),
            str(scratch / "model"),
            "--dtype",
            key["dtype"],
        ]
        env = {
            **os.environ,
            "PYTHONPATH": str(PACKAGE_ROOT),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        try:
            result = run_tied(argv, env=env, timeout_s=CONVERT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise WhichshotError(
                f"converting {gguf.name} for vLLM took over {CONVERT_TIMEOUT_S:.0f} s"
            ) from None
        _append_log(log_path, result)
        if result.returncode != 0:
            tail = " ".join(result.stderr.strip().splitlines()[-2:])
            raise WhichshotError(f"converting {gguf} for vLLM failed (log {log_path}): {tail}")
        manifest = json.loads(result.stdout.strip().splitlines()[-1])
        record = {
            "folder": str(home / "model"),
            "source_sha256": key["source_sha256"],
            "manifest": manifest,
            "manifest_sha256": short_id(manifest, length=64),
            "conversion": key,
            "convert_seconds": round(time.monotonic() - started, 1),
        }
        home.mkdir()
        os.replace(scratch / "model", home / "model")
        write_json_atomic(home / RECORD, record)
        return record
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _append_log(log_path: Path, result: subprocess.CompletedProcess[str]) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"whichshot: {' '.join(result.args)}\n{result.stderr}")
