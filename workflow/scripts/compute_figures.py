"""Turn shots and cross-check runs into the figure and caveat tables."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.entry import run_script
from whichshot.figures.table import write_figures_from_files


def main(smk):
    write_figures_from_files(
        Path(smk.input.shots),
        [Path(p) for p in smk.input.bench],
        smk.params.warm_fraction,
        Path(smk.output.figures),
        Path(smk.output.caveats),
        [Path(p) for p in smk.input.hardware],
        [Path(p) for p in smk.input.traffic],
        [Path(p) for p in smk.input.kernels_after],
        smk.params.verdict_margin,
        smk.params.verdict_level,
    )


run_script(snakemake, main)
