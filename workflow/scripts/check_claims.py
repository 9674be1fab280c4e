"""Set the configured claims against this run's figures: results/claims.parquet."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.claims.run import verdicts, write_verdicts
from whichshot.entry import run_script


def main(smk):
    inputs = smk.input
    probes = [Path(p) for p in inputs.hardware]
    rows = verdicts(inputs.claims, Path(inputs.figures), Path(inputs.shots), probes)
    write_verdicts(rows, Path(smk.output[0]))


run_script(snakemake, main)
