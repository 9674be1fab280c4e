"""A model's per-token costs (weight and KV bytes, parameters, attention FLOPs) from its GGUF."""

import json
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.cache import cache_root, derived_from_file
from whichshot.entry import run_script
from whichshot.errors import WhichshotError
from whichshot.prepare.model_traffic import model_traffic


def main(smk):
    model = json.loads(Path(smk.input[0]).read_text())
    identity = {"model": model["name"], "sha256": model["sha256"]}
    cache = cache_root(smk.params.cache_dir)
    try:
        read = partial(model_traffic, Path(model["path"]))
        costs = derived_from_file(cache, "model_traffic", model["sha256"], read)
        traffic = {**identity, **costs}
    except WhichshotError as exc:  # a shape we cannot read per token: no ceilings for this model
        traffic = {**identity, "not_derivable": str(exc)}
    write_json_atomic(Path(smk.output[0]), traffic)


run_script(snakemake, main)
