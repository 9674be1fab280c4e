"""The machine's peaks for the physical ceilings: our CPU probe, the GPUs' table entries, and the
engines' own kernels at the quantisations of the models they run (or, after the grid, the
engines' kernels alone: the second pass of their bracket)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.cache import cache_root
from whichshot.engine.machine_lock import measurement_lock
from whichshot.entry import run_script
from whichshot.measure.hardware_probe import probe_hardware
from whichshot.measure.kernel_probe import AFTER, probe_engine_kernels, wanted_types


def main(smk):
    cache = cache_root(smk.params.cache_dir)
    builds = {Path(path).parent.name: _read(path) for path in smk.input.builds}  # engines/<name>/build.json
    models = {m["name"]: m for m in map(_read, smk.input.models)}
    wanted = wanted_types(smk.params.kernels, models, cache)
    with measurement_lock():
        if smk.params.bracket == AFTER:
            probe = {"node": smk.params.node}
        else:
            probe = probe_hardware(smk.output[0], smk.params.node, smk.params.copy_threads)
        probe["engine_kernels"] = probe_engine_kernels(
            wanted, smk.params.engines, builds, cache, smk.params.bracket
        )
    write_json_atomic(Path(smk.output[0]), probe)


def _read(path: str) -> dict:
    return json.loads(Path(path).read_text())


run_script(snakemake, main)
