"""Pack a finished run into results/archive/<run_id>.tar.gz with its RO-Crate and manifest."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.archive.bundle import build_archive
from whichshot.entry import run_script


def main(smk):
    build_archive(
        [Path(p) for p in smk.input],
        Path.cwd(),
        Path(smk.scriptdir).resolve().parent.parent,
        dict(smk.config),
        Path(smk.output.archive),
    )


run_script(snakemake, main)
