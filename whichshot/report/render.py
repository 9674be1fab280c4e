"""Render index.html (self-contained, autoescaped) and summary.md from the figure table."""

import base64
import json
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, PackageLoader, select_autoescape

from whichshot.figures import SHOT_METRICS
from whichshot.report.plots import tok_s_by_shot_index

HEADLINE_METRICS = tuple(metric for metric, *_ in SHOT_METRICS)
_ENV = Environment(
    loader=PackageLoader("whichshot.report", "templates"),
    autoescape=select_autoescape(["html", "j2"], default=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def format_number(value: float | None) -> str:
    """Readable fixed-point numbers; 'not measured' for a missing value, never a guess."""
    if value is None or pd.isna(value):
        return "not measured"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 1:
        return f"{value:,.2f}"
    return f"{value:.4f}"


_ENV.filters["num"] = format_number


def headline_rows(figures: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per engine/model/length/protocol/rest with its headline figures."""
    protocol = figures[figures["protocol"].isin(["cold", "warm"])
                       & figures["metric"].isin(HEADLINE_METRICS)]  # fmt: skip
    rows = []
    keys = ["engine", "model", "series_label", "prompt_tokens", "protocol", "rest_s"]
    for key, group in protocol.groupby(keys, sort=False, dropna=False):
        cells = {row["metric"]: row for row in group.to_dict("records")}
        first = next(iter(cells.values()))
        rows.append({**dict(zip(keys, key, strict=True)), "cells": cells,
                     "shot_indices": first["shot_indices"]})  # fmt: skip
    return rows


def render_report(
    figures: pd.DataFrame,
    caveats: pd.DataFrame,
    shots: pd.DataFrame,
    runs: dict[str, list[dict[str, Any]]],
    plot_png: bytes,
    run_id: str,
) -> str:
    """The report's HTML: every number comes from a figures row and carries its id and kind."""
    template = _ENV.get_template("index.html.j2")
    return template.render(
        run_id=run_id,
        headline=headline_rows(figures),
        metrics=HEADLINE_METRICS,
        crosschecks=figures[~figures["metric"].isin(HEADLINE_METRICS)].to_dict("records"),
        inferred=figures[figures["kind"].isin(["inferred", "assumed"])].to_dict("records"),
        caveats=caveats.to_dict("records"),
        runs=runs,
        samples=_output_samples(shots),
        plot_b64=base64.b64encode(plot_png).decode("ascii"),
        n_shots=len(shots),
        n_failed=int((shots["status"] != "ok").sum()),
    )


def _output_samples(shots: pd.DataFrame) -> list[dict[str, Any]]:
    ok = shots[(shots["status"] == "ok") & (shots["series_position"] == 1)]
    firsts = ok.sort_values("shot_id").groupby(["engine", "model"], sort=True).head(1)
    return [{"shot_id": r["shot_id"], "model": r["model"], "text": (r["output_text"] or "")[:400]}
            for r in firsts.to_dict("records")]  # fmt: skip


def write_html(html: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")


def write_report_from_files(paths: dict[str, Any], html_path: Path, plot_path: Path, run_id: str) -> None:
    """The render step: figures, caveats, shots, build.json and model files -> HTML + plot."""
    shots = pd.read_parquet(paths["shots"])
    builds = [{"engine": Path(p).parent.name, **json.loads(Path(p).read_text())} for p in paths["builds"]]
    models = [json.loads(Path(p).read_text()) for p in paths["models"]]
    plot_png = tok_s_by_shot_index(shots, plot_path)
    html = render_report(
        pd.read_parquet(paths["figures"]),
        pd.read_parquet(paths["caveats"]),
        shots,
        {"builds": builds, "models": models},
        plot_png,
        run_id,
    )
    write_html(html, html_path)
