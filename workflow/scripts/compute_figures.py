"""Turn shots and cross-check runs into the figure and caveat tables."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.entry import run_script
from whichshot.figure_table import compute_figures, write_figure_tables
from whichshot.stats import WarmRule
from whichshot.tables import read_table


def main(smk):
    shots = read_table(Path(smk.input.shots))
    bench_runs = [json.loads(Path(p).read_text()) for p in smk.input.bench]
    figures, caveats = compute_figures(shots, bench_runs, WarmRule(smk.params.warm_fraction))
    write_figure_tables(figures, caveats, Path(smk.output.figures), Path(smk.output.caveats))


run_script(snakemake, main)
