"""Decide after one look of a cell that runs until decided (whichshot.figures.look_decision)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.atomic import write_json_atomic
from whichshot.entry import run_script
from whichshot.figures.look_decision import decide_look
from whichshot.measure.looks import looks_of


def main(smk):
    looks = looks_of({"until_decided": smk.params.looks})
    made = decide_look([Path(p) for p in smk.input], int(smk.wildcards.look), looks,
                       smk.params.warm_fraction, smk.params.margin)  # fmt: skip
    write_json_atomic(Path(smk.output[0]), made)


run_script(snakemake, main)
