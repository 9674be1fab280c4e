"""Every job's JSONL -> the versioned Parquet tables (shots tables of older versions are read as
current by whichshot.shots.upgrade).

The shot records are not changed here: the lossless check (which needs two shots) and the run's id
are added to copies. The run_id is stamped here, not as shots are measured: it labels the run, and
a new label must re-measure nothing (a series' job reads only its plan, measure.plan).
"""

import json
from pathlib import Path

from whichshot.measure.busy import kept
from whichshot.shots.lossless import with_lossless
from whichshot.tables import read_jsonl, record_schema, validate_records, write_table


def aggregate(
    table: str, jsonl_paths: list[Path], out_path: Path, run_id: str, divergence_paths: list[Path] = ()
) -> None:
    """One table ('shots' or 'telemetry') from the jobs' JSONL files, validated against its schema;
    every shot labelled with the run's id, the drafted ones' divergences classified from the run's
    divergence probes (measure.divergence_probe). A replaced process's shots (measure.busy) stay in
    the JSONL files only: they are never counted."""
    records = read_jsonl(jsonl_paths)
    if table == "shots":
        probes = [json.loads(Path(path).read_text()) for path in divergence_paths]
        records = with_lossless([{**record, "run_id": run_id} for record in kept(records)], probes)
    schema = record_schema(table)
    validate_records(records, schema)
    write_table(records, schema, out_path)
