"""What Snakemake's file persistence (.snakemake/metadata) recorded of an output: read, never
written. A record's name is the output's path in URL-safe base64; one longer than the file system's
name limit is split into folders whose names begin with '@'. Where the record is gone (a deleted
.snakemake, another persistence backend) Snakemake reruns nothing for changed params."""

import base64
import json
from pathlib import Path
from typing import Any

METADATA = Path(".snakemake") / "metadata"


def record_of(output: Path, metadata_dir: Path = METADATA) -> dict[str, Any] | None:
    """The record of an output (relative to the working directory), or None where there is none."""
    name = base64.urlsafe_b64encode(str(output).encode()).decode()
    limit = 254  # a name of up to 255 characters: the split Snakemake makes past that
    parts = [name[i : i + limit] for i in range(0, len(name), limit)]
    path = metadata_dir.joinpath(*["@" + part for part in parts[:-1]], parts[-1])
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def recorded_params(record: dict[str, Any]) -> list[str] | None:
    """The params the record holds, as Snakemake compares them (each value's repr, sorted)."""
    try:
        params = (
            json.loads(record["params"]) if isinstance(record.get("params"), str) else record.get("params")
        )
    except ValueError:
        return None
    return params if isinstance(params, list) else None


def params_as_recorded(*values: Any) -> list[str]:
    """Params as Snakemake records them: the repr of each, sorted."""
    return sorted(repr(value) for value in values)
