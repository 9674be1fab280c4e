"""The machine's peaks for the physical ceilings: our CPU probe, and the GPUs' table entries."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.entry import run_script
from whichshot.measure.hardware_probe import probe_hardware
from whichshot.measure.machine_lock import measurement_lock


def main(smk):
    with measurement_lock():
        probe = probe_hardware(smk.output[0], smk.params.node)
    write_json_atomic(Path(smk.output[0]), probe)


run_script(snakemake, main)
