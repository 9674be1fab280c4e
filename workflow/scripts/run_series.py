"""Run one series from its plan (whichshot.measure.plan): its shots and telemetry samples as JSONL,
its llama-bench brackets in bench.json. Kept this short on purpose: Snakemake reruns every series
whose outputs are older than this file."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.entry import run_script
from whichshot.measure.plan import SeriesInputs
from whichshot.measure.series import SeriesOutputs, run_planned_series


def main(smk):
    draft = getattr(smk.input, "draft_model", None)
    inputs = SeriesInputs(Path(smk.input.build), Path(smk.input.model), Path(smk.input.prompts),
                          Path(draft) if draft else None)  # fmt: skip
    outputs = SeriesOutputs(Path(smk.output.shots), Path(smk.output.telemetry), Path(smk.output.bench))
    # The config gives the engine's secrets (the plan holds them keyed) and the whole grid for the
    # progress line; it is no rerun trigger: the plan is.
    run_planned_series(smk.params.plan, inputs, outputs, smk.config)


run_script(snakemake, main)
