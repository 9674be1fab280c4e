"""A model's per-token costs (weight and KV bytes, parameters, attention FLOPs) from its GGUF."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.entry import run_script
from whichshot.errors import WhichshotError
from whichshot.prepare.model_traffic import model_traffic


def main(smk):
    model = json.loads(Path(smk.input[0]).read_text())
    identity = {"model": model["name"], "sha256": model["sha256"]}
    try:
        traffic = {**identity, **model_traffic(Path(model["path"]))}
    except WhichshotError as exc:  # a shape we cannot read per token: no ceilings for this model
        traffic = {**identity, "not_derivable": str(exc)}
    write_json_atomic(Path(smk.output[0]), traffic)


run_script(snakemake, main)
