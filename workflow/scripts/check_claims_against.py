"""Check the configured claims against an existing run (a results folder or an unpacked archive),
measuring nothing: results/claims_check/ with the verdicts and their own small report."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.entry import run_script
from whichshot.report.claims import check_existing_run


def main(smk):
    check_existing_run(smk.input.claims, smk.params.run, {k: Path(v) for k, v in smk.output.items()})


run_script(snakemake, main)
