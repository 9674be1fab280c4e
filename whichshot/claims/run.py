"""The check_claims step: claims files + a run's figures -> results/claims.parquet (against an existing run,
report.claims.check_existing_run adds its own small Markdown and HTML report)."""

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from whichshot.claims.check import check_claims
from whichshot.claims.load import load_claims
from whichshot.errors import WhichshotError
from whichshot.figures.table import read_figures
from whichshot.tables import record_schema, write_table


def run_tables(run: Path) -> dict[str, Path]:
    """figures, shots and the hardware probes of a results folder or an unpacked archive."""
    for root in (run, run / "results"):
        if (root / "figures.parquet").is_file():
            return {"figures": root / "figures.parquet", "shots": root / "shots.parquet",
                    "hardware": probe_files(root)}  # fmt: skip
    raise WhichshotError(f"{run} holds no figures.parquet (nor results/figures.parquet): not a whichshot run")


def probe_files(results: Path) -> list[Path]:
    """A results folder's hardware probes: probe-<node>.json per placement node where there are any
    (a probe.json beside them is from before nodes were listed), else probe.json."""
    folder = results / "hardware"
    return sorted(folder.glob("probe-*.json")) or sorted(folder.glob("probe.json"))


def hardware_names(shots: pd.DataFrame, probe_paths: list[Path]) -> list[str]:
    """What this run ran on, by name: its CPU models, the GPUs its shots computed on (gpu_name, '|'-joined
    where a job's GPUs differ) and the GPUs the probes named."""
    names = [str(n) for n in shots["cpu_model"].dropna().unique()] if "cpu_model" in shots else []
    if "gpu_name" in shots:
        names += [name for joined in shots["gpu_name"].dropna().unique() for name in str(joined).split("|")]
    for path in probe_paths:
        names += [gpu["name"] for gpu in json.loads(Path(path).read_text())["gpus"]]
    return list(dict.fromkeys(names))


def verdicts(
    claim_files: list[Path], figures_path: Path, shots_path: Path, probe_paths: list[Path]
) -> list[dict[str, Any]]:
    claims = [claim for path in claim_files for claim in load_claims(Path(path))]
    figures = read_figures(figures_path)
    present = set(pq.read_schema(shots_path).names)
    shots = pd.read_parquet(shots_path, columns=[c for c in ("cpu_model", "gpu_name") if c in present])
    return check_claims(claims, figures, hardware_names(shots, probe_paths))


def write_verdicts(rows: list[dict[str, Any]], out: Path) -> None:
    write_table(rows, record_schema("claim_verdicts"), out)
