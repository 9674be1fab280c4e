"""Parquet tables whose columns and types come from the JSON schemas in whichshot/schemas
(workflow/schemas links there, the snakemake-workflows place for them)."""

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from whichshot.errors import WhichshotError

_SCALARS = {"integer": pa.int64(), "number": pa.float64(), "string": pa.string(),
            "boolean": pa.bool_()}  # fmt: skip


@cache
def record_schema(name: str) -> dict[str, Any]:
    """A schema shipped with the package, e.g. 'shots' -> whichshot/schemas/shots.schema.yaml (read
    once; callers must not change it)."""
    return yaml.safe_load(resources.files("whichshot.schemas").joinpath(f"{name}.schema.yaml").read_text())


def arrow_schema(schema: dict[str, Any]) -> pa.Schema:
    """The Arrow schema that a JSON record schema describes, with its version in the metadata."""
    fields = [pa.field(name, _arrow_type(prop)) for name, prop in schema["properties"].items()]
    return pa.schema(fields, metadata={"schema_version": str(schema["x-schema-version"])})


def _arrow_type(prop: dict[str, Any]) -> pa.DataType:
    kinds = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
    kind = next(k for k in kinds if k != "null")
    if kind == "array":
        return pa.list_(_SCALARS[prop["items"]["type"]])
    return _SCALARS[kind]


def read_jsonl(paths: list[Path]) -> list[dict[str, Any]]:
    """All records of these JSONL files, in order."""
    records = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                records.append(json.loads(line))
    return records


def validate_records(records: list[dict[str, Any]], schema: dict[str, Any]) -> None:
    """Refuse a record that does not match its schema, naming the shot and the field."""
    validator = jsonschema.Draft202012Validator(schema)
    for record in records:
        error = jsonschema.exceptions.best_match(validator.iter_errors(record))
        if error is not None:
            where = ".".join(str(p) for p in error.absolute_path) or "<record>"
            raise WhichshotError(f"{record.get('shot_id', '?')}: {where}: {error.message}")


def write_table(records: list[dict[str, Any]], schema: dict[str, Any], path: Path) -> None:
    """Write records as Parquet with exactly the schema's columns (missing -> null)."""
    arrow = arrow_schema(schema)
    columns = {name: [r.get(name) for r in records] for name in arrow.names}
    table = pa.Table.from_pydict(columns, schema=arrow)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def read_table(path: Path) -> pd.DataFrame:
    """A Parquet table as a DataFrame."""
    return pd.read_parquet(path)
