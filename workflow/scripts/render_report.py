"""Render the HTML report and its plot files from the figure table."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.entry import run_script
from whichshot.report.plots import tok_s_by_shot_index
from whichshot.report.render import render_report, write_html
from whichshot.tables import read_table


def main(smk):
    shots = read_table(Path(smk.input.shots))
    builds = [{"engine": Path(p).parent.name, **json.loads(Path(p).read_text())}
              for p in smk.input.builds]  # fmt: skip
    models = [json.loads(Path(p).read_text()) for p in smk.input.models]
    plot_png = tok_s_by_shot_index(shots, Path(smk.output.shot_plot))
    html = render_report(
        read_table(Path(smk.input.figures)),
        read_table(Path(smk.input.caveats)),
        shots,
        {"builds": builds, "models": models},
        plot_png,
        smk.params.run_id,
    )
    write_html(html, Path(smk.output.html))


run_script(snakemake, main)
