"""Collect every job's JSONL into the versioned Parquet tables."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent.parent))

from whichshot.entry import run_script
from whichshot.lossless import annotate_lossless
from whichshot.tables import read_jsonl, record_schema, validate_records, write_table


def main(smk):
    for table in ("shots", "telemetry"):
        records = read_jsonl([Path(p) for p in smk.input[table]])
        if table == "shots":
            records = annotate_lossless(records)
        schema = record_schema(table)
        validate_records(records, schema)
        write_table(records, schema, Path(smk.output[table]))


run_script(snakemake, main)
