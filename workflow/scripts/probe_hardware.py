"""The machine's peaks for the physical ceilings: our CPU probe, the GPUs' table entries, and the
engines' own kernels at the quantisations of the models they run."""

import json
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.cache import cache_root, derived_from_file
from whichshot.entry import run_script
from whichshot.errors import WhichshotError
from whichshot.measure.hardware_probe import probe_hardware
from whichshot.measure.kernel_probe import probe_engine_kernels
from whichshot.measure.machine_lock import measurement_lock
from whichshot.prepare.model_traffic import model_traffic


def main(smk):
    cache = cache_root(smk.params.cache_dir)
    builds = {Path(path).parent.name: _read(path) for path in smk.input.builds}  # engines/<name>/build.json
    models = {m["name"]: m for m in map(_read, smk.input.models)}
    wanted = {
        engine: sorted({t for model in names for t in _matrix_types(cache, models[model])})
        for engine, names in smk.params.kernels.items()
    }
    with measurement_lock():
        probe = probe_hardware(smk.output[0], smk.params.node, smk.params.copy_threads)
        probe["engine_kernels"] = probe_engine_kernels(wanted, smk.params.engines, builds, cache)
    write_json_atomic(Path(smk.output[0]), probe)


def _read(path: str) -> dict:
    return json.loads(Path(path).read_text())


def _matrix_types(cache: Path, model: dict) -> list[str]:
    """The ggml types of a model's prefill matrices (none where its per-token costs are unreadable)."""
    read = partial(model_traffic, Path(model["path"]))
    try:
        costs = derived_from_file(cache, "model_traffic", model["sha256"], read)
    except WhichshotError:
        return []
    return list(costs["prefill_matrix_parameters_by_type"])


run_script(snakemake, main)
