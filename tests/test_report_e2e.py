"""The report of one real small run: every number traceable, self-contained, renders in a browser."""

import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
import pytest

from tests.pipeline import REPO
from tests.report_run import finished_report_run
from tests.system_packages import CHROMIUM
from whichshot.figures.caveats import rules
from whichshot.figures.provenance import KINDS
from whichshot.report.plot_list import PLOT_NAMES
from whichshot.report.screenshot import screenshot

pytestmark = pytest.mark.e2e


class _Collector(HTMLParser):
    """Figure ids, links and embedded sources of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.figure_ids: list[str] = []
        self.urls: list[str] = []
        self.tags: list[str] = []
        self.element_ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if "data-figure-id" in attrs:
            self.figure_ids.append(attrs["data-figure-id"])
        if "id" in attrs:
            self.element_ids.add(attrs["id"])
        self.urls += [attrs[key] for key in ("src", "href") if key in attrs]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return finished_report_run(tmp_path_factory)


@pytest.fixture(scope="module")
def figures(run) -> pd.DataFrame:
    return pd.read_parquet(run / "results" / "figures.parquet")


@pytest.fixture(scope="module")
def page(run) -> _Collector:
    collector = _Collector()
    collector.feed((run / "results" / "report" / "index.html").read_text(encoding="utf-8"))
    return collector


def test_every_figure_in_the_html_has_a_row_and_every_row_is_shown(figures, page):
    shown = set(page.figure_ids)
    assert shown, "the report shows no figure"
    assert shown <= set(figures["figure_id"]), shown - set(figures["figure_id"])
    assert set(figures["figure_id"]) <= shown, set(figures["figure_id"]) - shown


def test_every_figure_row_says_what_it_is_and_which_shot(figures):
    assert figures["figure_id"].is_unique
    assert set(figures["kind"]) <= set(KINDS)
    for row in figures.to_dict("records"):
        where = row["figure_id"]
        assert row["unit"] and row["formula"] and row["metric"] and row["which_shot"], where
        assert row["computed_by"].startswith("whichshot.figures."), where
        assert len(row["shot_ids"]) + len(row["source_ids"]) + len(row["input_figure_ids"]) > 0, where
        picked = row["aggregation"] in ("median", "median_of_series_medians")
        if row["protocol"] == "warm" and picked and pd.notna(row["value"]):  # parquet nulls read as NaN
            assert row["shot_indices"] and row["rest_s"] is not None, where


def test_workload_table_and_its_figures(figures, run):
    workload = figures[figures["workload"] == "verbatim_recall"]
    assert set(workload["spec_mode"]) == {"none", "ngram_simple"}
    assert set(workload["text_kind"]) == {"real", "synthetic"}
    metrics = set(workload["metric"])
    assert {"decode_tok_s", "speedup_vs_none", "acceptance_rate", "copy_fraction", "lossless_share",
            "recall_exact_share"} <= metrics  # fmt: skip
    speedups = workload[workload["metric"] == "speedup_vs_none"]
    assert set(speedups["protocol"]) == {"cold", "warm"} and (speedups["value"] > 0).all()
    html = (run / "results" / "report" / "index.html").read_text(encoding="utf-8")
    assert 'id="workloads"' in html and "ngram_simple" in html
    summary = (run / "results" / "report" / "summary.md").read_text(encoding="utf-8")
    assert "## Workloads × speculative modes" in summary
    cells = workload[(workload["metric"] == "decode_tok_s") & workload["shot_index"].isna()]
    section = summary.split("## Workloads × speculative modes")[1].split("\n## ")[0]
    assert section.count("| smollm2_135m | verbatim_recall |") == len(cells)
    # llama-bench's verify cost without the server's probe (off in this config): no prediction, and
    # the cost model's table (a row per predicted cell, tests/test_speedup_model.py) is left out
    assert (workload["metric"] == "verify_cost_ratio").any()
    assert not (workload["metric"] == "predicted_speedup_vs_none").any()
    assert "## Why drafting gains this much here" not in summary and 'id="speedup-model"' not in html


def test_caveats_fire_from_the_data_and_link_to_their_figures(run, figures, page):
    caveats = pd.read_parquet(run / "results" / "caveats.parquet")
    shots = pd.read_parquet(run / "results" / "shots.parquet")
    fired = set(caveats["caveat_id"])
    assert {"single_machine", "one_repeat", "synthetic_text_in_use", "rival_tool_figure"} <= fired
    assert ("sensor_not_readable" in fired) == shots["telemetry_not_measured"].notna().any()
    assert ("prompt_cache_hit" in fired) == (shots["engine_cached_tokens"].fillna(0) > 0).any()
    lossless = figures[figures["metric"] == "lossless_share"]["value"]
    assert ("lossless_check_failed" in fired) == (lossless < 1).any()
    assert "verify_probe_not_measured" not in fired  # the probe is off by the config's choice
    assert caveats["caveat_id"].is_unique and len(caveats) <= len(rules())
    for caveat in caveats.to_dict("records"):
        assert f"cav-{caveat['caveat_id']}" in page.element_ids
        assert set(caveat["figure_ids"]) <= set(figures["figure_id"])
    for row in figures.to_dict("records"):
        assert set(row["caveat_ids"]) <= fired


def test_report_is_self_contained(page):
    external = [u for u in page.urls if not u.startswith(("#", "data:"))]
    assert external == []
    assert "script" not in page.tags and "link" not in page.tags


def test_every_plot_is_a_file_and_the_drawn_ones_are_embedded(run, page):
    report = run / "results" / "report"
    for name in PLOT_NAMES:
        assert (report / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    drawn = {"tok_s_by_shot_index", "workload_modes", "copy_vs_speedup", "acceptance_real_synthetic",
             "ngram_warm_series", "client_vs_engine"}  # fmt: skip
    assert drawn <= {i.removeprefix("plot-") for i in page.element_ids if i.startswith("plot-")}
    assert sum(u.startswith("data:image/png;base64,") for u in page.urls) >= len(drawn)


def test_snakemake_report_zip(run):
    argv = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
            "--directory", str(run), "--report", "results/report/snakemake-report.zip"]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    with zipfile.ZipFile(run / "results" / "report" / "snakemake-report.zip") as archive:
        names = archive.namelist()
    files = {Path(n).name for n in names}
    assert {"report.html", "index.html", "summary.md"} <= files, names
    assert {f"{name}.png" for name in PLOT_NAMES} <= files


@CHROMIUM.needed()
def test_headless_chromium_renders_a_non_blank_page(run, tmp_path):
    png = tmp_path / "report.png"
    screenshot(run / "results" / "report" / "index.html", png, 1400, 4000)
    pixels = matplotlib.image.imread(png)
    assert pixels.shape[:2] == (4000, 1400)
    grey = pixels[..., :3].mean(axis=2)
    assert grey.std() > 0.05
    assert np.mean(grey < 0.5) > 0.01  # dark pixels: text, table rules, plot lines
