"""Render index.html (self-contained, autoescaped) and summary.md from the figure table."""

import base64
import json
from pathlib import Path
from typing import Any

import pandas as pd

from whichshot.figures.caveats.run_rules import MACHINE_IDENTITY
from whichshot.report.answer import answer_block
from whichshot.report.cells import CellWriter, short_cell
from whichshot.report.claims import counts_line, source_titles, split_claims
from whichshot.report.compare import ATTRIBUTION, NO_COMMON_CELL, Run, compare_runs, load_run, table_cells
from whichshot.report.format import KIND_LETTERS, KIND_WORDS
from whichshot.report.layout import caveat_numbers, lay_out, run_wide
from whichshot.report.plots import Plot, draw_plots
from whichshot.report.summary import render_summary
from whichshot.report.tables import build_tables
from whichshot.report.templating import ENV
from whichshot.shots.upgrade import upgrade_shots

SAMPLE_CHARS = 400


def render_report(
    figures: pd.DataFrame,
    caveats: pd.DataFrame,
    shots: pd.DataFrame,
    runs: dict[str, list[dict[str, Any]]],
    plots: list[Plot],
    run_id: str,
    privacy: dict[str, bool] | None = None,
    claims: list[dict[str, Any]] | None = None,
    comparison: dict[str, Any] | None = None,
) -> str:
    """The report's HTML: every number comes from a figures row and carries its id and kind. Request
    text and model output are shown only with privacy["show_text"]."""
    privacy = {"show_text": False, "include_inputs": False, **(privacy or {})}
    tables = build_tables(figures)
    everywhere = run_wide(figures, caveats)
    numbers = caveat_numbers(caveats, everywhere)
    checked_claims, other_claims = split_claims(claims or [])
    return ENV.get_template("index.html.j2").render(
        run_id=run_id,
        answer=answer_block(figures),
        run=run_summary(shots),
        short_cell=short_cell,
        inferred_apart=inferred_apart(tables),
        tables=tables,
        laid_out=lay_out(tables, numbers),
        figure_part=CellWriter(numbers).value,
        kinds=KIND_WORDS,
        kind_letters=KIND_LETTERS,
        caveats=caveat_rows(caveats),
        run_wide=[c for c in caveats["caveat_id"] if c in everywhere],
        plots=[
            {**p.__dict__, "b64": base64.b64encode(p.png).decode("ascii") if p.png else None} for p in plots
        ],
        runs=runs,
        samples=output_samples(shots) if privacy["show_text"] else [],
        sample_chars=SAMPLE_CHARS,
        show_text=privacy["show_text"],
        claims=claims or [],
        checked_claims=checked_claims,
        other_claims=other_claims,
        claim_sources=source_titles(claims or []),
        claim_counts=counts_line(claims or []),
        privacy=privacy_words(privacy),
        comparison=comparison,
    )


def privacy_words(privacy: dict[str, bool]) -> str:
    """What of the user's text this report and the run's archive hold, in one sentence."""
    shown = (
        "This report shows model output (report.show_text: true)"
        if privacy["show_text"]
        else "This report shows no request text and no model output (report.show_text: false)"
    )
    archived = (
        "the archive holds your input files and the prompts cut from them (archive.include_inputs: true)"
        if privacy["include_inputs"]
        else "the archive names your input files by path and sha256 only, and its prompts files keep no "
        "text or token ids of them (archive.include_inputs: false)"
    )
    return f"{shown}; {archived}. shots.parquet keeps each shot's output, which can repeat its input."


def run_summary(shots: pd.DataFrame) -> dict[str, Any]:
    """Where and when the run happened, from the shots' identity columns (no figures here)."""
    first = shots.iloc[0] if len(shots) else pd.Series(dtype=object)
    starts = shots["wall_start_utc"].dropna().sort_values() if "wall_start_utc" in shots else pd.Series()
    return {
        "hosts": sorted(shots["hostname"].dropna().unique()) if "hostname" in shots else [],
        "cpu": first.get("cpu_model"),
        "os": first.get("os"),
        "started": starts.iloc[0][:19] if len(starts) else None,
        "ended": starts.iloc[-1][:19] if len(starts) else None,
        "machines": machine_rows(shots),
        "threads": sorted(int(t) for t in shots["threads"].dropna().unique()) if "threads" in shots else [],
    }


def inferred_apart(tables: Any) -> dict[str, Any]:
    """The inferred figures no other section shows (listed in their own section), and the sections
    that show the rest (named there, not listed twice)."""
    ids_in = {s.key: {r["figure_id"] for r in s.rows} for s in tables.sections}
    elsewhere = set().union(*ids_in.values()) if ids_in else set()
    return {
        "rows": [f for f in tables.inferred if f["figure_id"] not in elsewhere],
        "shown_in": [
            {
                "key": s.key,
                "title": s.title.split(":")[0],
                "n": len(ids_in[s.key] & {f["figure_id"] for f in tables.inferred}),
            }
            for s in tables.sections
            if ids_in[s.key] & {f["figure_id"] for f in tables.inferred}
        ],
    }


# A machine's identity as its shots recorded it, with the Slurm node that ran them.
MACHINE_COLUMNS = ("slurm_node", *MACHINE_IDENTITY)


def machine_rows(shots: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per machine the shots ran on: its identity (each value it recorded, '/'-joined where
    its shots disagree; '' where not recorded), and how many series and shots ran there."""
    if "hostname" not in shots or shots.empty:
        return []
    rows = []
    for host, ran in shots.groupby("hostname", sort=True):
        row = {"hostname": host, "series": ran["job_id"].nunique(), "shots": len(ran)}
        for column in MACHINE_COLUMNS:
            values = ran[column].dropna().unique() if column in ran else []
            row[column] = "/".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)
        rows.append(row)
    return rows


def caveat_rows(caveats: pd.DataFrame) -> list[dict[str, Any]]:
    rows = caveats.to_dict("records")
    for n, row in enumerate(rows, start=1):
        row["number"] = n
        row["figure_ids"] = list(row["figure_ids"]) if row.get("figure_ids") is not None else []
    return rows


def output_samples(shots: pd.DataFrame) -> list[dict[str, Any]]:
    """The first shot's output of each engine, model and workload (the protocol grid's continued text
    is one): untrusted text, escaped by the template."""
    ok = shots[(shots["status"] == "ok") & (shots["series_position"] == 1)]
    firsts = ok.sort_values("shot_id").groupby(["engine", "model", "workload"], sort=True).head(1)
    return [
        {
            **{key: r[key] for key in ("shot_id", "model", "workload")},
            "text": (r["output_text"] or "")[:SAMPLE_CHARS],
        }
        for r in firsts.to_dict("records")
    ]


def write_text(text: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def load_runs(builds: list[Path], models: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """build.json of each engine and the record of each model."""
    return {
        "builds": [{"engine": Path(p).parent.name, **json.loads(Path(p).read_text())} for p in builds],
        "models": [json.loads(Path(p).read_text()) for p in models],
    }


def comparison_section(other: str, run_id: str, figures: pd.DataFrame, shots: pd.DataFrame) -> dict[str, Any]:
    """The report's comparison of this run (B) with another run's results dir (A)."""
    header, rows = table_cells(
        compare_runs(load_run(Path(other)), Run(run_id, figures, upgrade_shots(shots)))
    )
    return {
        "a": other,
        "b": run_id,
        "rule": ATTRIBUTION,
        "header": header,
        "rows": rows,
        "empty": NO_COMMON_CELL,
    }


def write_report_from_files(
    paths: dict[str, Any],
    report_dir: Path,
    run_id: str,
    privacy: dict[str, bool] | None = None,
    compare_with: str = "",
) -> None:
    """The render step: figures, caveats, shots, build.json and model files -> index.html,
    summary.md and one PNG per plot in report_dir; with compare_with, a section comparing this run
    with that one."""
    read = _read_tables(paths)
    figures, shots = read["figures"], read["shots"]
    plots = draw_plots(figures, report_dir)
    comparison = comparison_section(compare_with, run_id, figures, shots) if compare_with else None
    html = render_report(
        figures, read["caveats"], shots, read["runs"], plots, run_id, privacy, read["claims"], comparison
    )
    write_text(html, report_dir / "index.html")
    write_summary(read, report_dir, run_id)


def write_summary_from_files(paths: dict[str, Any], report_dir: Path, run_id: str) -> None:
    """summary.md alone (no plots, no index.html): what a check of a committed run compares."""
    write_summary(_read_tables(paths), report_dir, run_id)


def write_summary(read: dict[str, Any], report_dir: Path, run_id: str) -> None:
    shots = run_summary(read["shots"])
    summary = render_summary(read["figures"], read["caveats"], run_id, read["claims"], shots, read["runs"])
    write_text(summary, report_dir / "summary.md")


def _read_tables(paths: dict[str, Any]) -> dict[str, Any]:
    return {
        "shots": pd.read_parquet(paths["shots"]),
        "figures": pd.read_parquet(paths["figures"]),
        "caveats": pd.read_parquet(paths["caveats"]),
        "runs": load_runs(paths["builds"], paths["models"]),
        "claims": pd.read_parquet(paths["claims"]).to_dict("records") if paths.get("claims") else [],
    }
