"""One series' prompts from its source's prompts file, named by their content (a script, not a
`run:` block: Snakemake re-reads the workflow for a `run:` job, and with --replace-workflow-config
its default config came back on top of the user's)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.entry import run_script
from whichshot.prepare.series_prompts import write_series_prompts


def main(smk):
    write_series_prompts(Path(smk.input[0]), Path(smk.output[0]))


run_script(snakemake, main)
