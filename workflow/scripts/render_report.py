"""Render the HTML report, summary.md and the plot files from the figure table."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.entry import run_script
from whichshot.report.render import write_report_from_files


def main(smk):
    paths = {key: smk.input[key] for key in ("claims", "figures", "caveats", "shots", "builds", "models")}
    write_report_from_files(
        paths, Path(smk.output.html).parent, smk.params.run_id, smk.params.privacy, smk.params.compare_with
    )


run_script(snakemake, main)
