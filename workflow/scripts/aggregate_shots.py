"""Collect every job's JSONL into the versioned Parquet tables."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.entry import run_script
from whichshot.measure.aggregate import aggregate


def main(smk):
    probes = [Path(p) for p in smk.input.divergence]
    for table in ("shots", "telemetry"):
        aggregate(table, [Path(p) for p in smk.input[table]], Path(smk.output[table]), smk.params.run_id,
                  probes if table == "shots" else [])  # fmt: skip


run_script(snakemake, main)
