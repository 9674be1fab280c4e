"""Ask the target for its top candidates where a drafted series' outputs part from the undrafted
ones (whichshot.measure.divergence_probe)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.entry import run_script
from whichshot.measure.divergence_probe import run_divergence_probe
from whichshot.measure.plan import SeriesInputs


def main(smk):
    inputs = SeriesInputs(Path(smk.input.build), Path(smk.input.model), Path(smk.input.prompts))
    shots = (Path(smk.input.drafted), Path(smk.input.undrafted))
    run_divergence_probe(smk.params.plan, inputs, smk.wildcards.job, shots, Path(smk.output[0]))


run_script(snakemake, main)
