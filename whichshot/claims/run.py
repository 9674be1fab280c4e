"""The check_claims step: claims files + a run's figures -> results/claims.parquet (and, against an
existing run, its own small Markdown and HTML report)."""

import json
from pathlib import Path
from typing import Any

import pandas as pd

from whichshot.claims.check import check_claims
from whichshot.claims.load import load_claims
from whichshot.errors import WhichshotError
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
    """What this run ran on, by name: its CPU models and the GPUs the probes named."""
    names = [str(n) for n in shots["cpu_model"].dropna().unique()] if "cpu_model" in shots else []
    for path in probe_paths:
        names += [gpu["name"] for gpu in json.loads(Path(path).read_text())["gpus"]]
    return list(dict.fromkeys(names))


def verdicts(
    claim_files: list[Path], figures_path: Path, shots_path: Path, probe_paths: list[Path]
) -> list[dict[str, Any]]:
    claims = [claim for path in claim_files for claim in load_claims(Path(path))]
    figures = pd.read_parquet(figures_path)
    shots = pd.read_parquet(shots_path, columns=["cpu_model"])
    return check_claims(claims, figures, hardware_names(shots, probe_paths))


def write_verdicts(rows: list[dict[str, Any]], out: Path) -> None:
    write_table(rows, record_schema("claim_verdicts"), out)


def check_existing_run(claim_files: list[str], run: str | None, outputs: dict[str, Path]) -> None:
    """Verdicts against a run already on disk, with their own Markdown and HTML report."""
    from whichshot.report.claims import claims_html, claims_markdown

    if not run:
        raise WhichshotError("claims_check needs the run to check: --config claims_against=PATH")
    if not claim_files:
        raise WhichshotError("claims_check needs claims files: --config 'claims=[claims/seed-000.yaml]'")
    tables = run_tables(Path(run).expanduser())
    rows = verdicts([Path(p) for p in claim_files], tables["figures"], tables["shots"], tables["hardware"])
    write_verdicts(rows, outputs["table"])
    title = f"Claims checked against {run}"
    outputs["markdown"].write_text(claims_markdown(rows, title), encoding="utf-8")
    outputs["html"].write_text(claims_html(rows, title), encoding="utf-8")
