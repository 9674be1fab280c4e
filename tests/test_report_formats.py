"""Each report table is described once (report.layout) and both formats render that description: on
committed reference runs, every table summary.md shows has the same columns and rows, cell for cell,
as the same table in index.html, and a struck speed-up is struck in both. The list of plots lives once
(report.plot_list): the workflow declares each plot, plots.py draws each."""

import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from tests.pipeline import REPO, load_config, run_pipeline
from tests.shot_tables import cell, series, table
from whichshot.figures.caveats.gates import STRUCK_MEANS
from whichshot.figures.table import compute_figures
from whichshot.report.layout import caveat_numbers, lay_out, run_wide
from whichshot.report.plot_list import PLOT_NAMES, PLOTS
from whichshot.report.plots import DRAW
from whichshot.report.render import load_runs, render_report
from whichshot.report.summary import render_summary
from whichshot.report.tables import build_tables

REFERENCES = REPO / "results" / "reference"
# Between them: the workload, cost-model, load, trace, engines and nodes tables, struck speed-ups.
RUNS = (
    "cpu_cost_model",
    "h200/cross_engine",
    "h200/seed_002",
    "cpu_trace_example",
    "slurm_local_nodes/compare",
)


class _HtmlTables(HTMLParser):
    """Each table that follows an <h2 id>: header rows as (text, colspan), body rows as (text, struck)
    per cell; an id label (.fid, a hover aid of the page) left out, a line break read as '; '."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, list]] = {}
        self.key = ""
        self.part = ""  # 'head' or 'body' inside a table that follows an h2
        self.label_depth = 0  # > 0 inside an id label
        self.row: list | None = None
        self.text: list[str] | None = None
        self.cell_look: tuple[int, bool] = (1, False)  # a th's colspan, a td's struck

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        looks = (found.get("class") or "").split()
        if self.label_depth or (tag == "span" and "fid" in looks):
            self.label_depth += tag != "br"
        elif tag == "h2":
            self.key = found.get("id", "")
        elif tag == "table" and "data" in looks and self.key:
            self.tables[self.key] = {"head": [], "body": []}
        elif tag in ("thead", "tbody") and self.key in self.tables:
            self.part = "head" if tag == "thead" else "body"
        elif tag == "tr" and self.part:
            self.row = []
        elif tag in ("th", "td") and self.row is not None:
            self.text = []
            self.cell_look = (int(found.get("colspan", 1)), "apart" in looks)
        elif tag == "br" and self.text is not None:
            self.text.append("; ")

    def handle_endtag(self, tag):
        if self.label_depth:
            self.label_depth -= 1
        elif tag in ("th", "td") and self.text is not None and self.row is not None:
            span, struck = self.cell_look
            self.row.append(("".join(self.text), span if tag == "th" else struck))
            self.text = None
        elif tag == "tr" and self.row is not None:
            self.tables[self.key][self.part].append(self.row)
            self.row = None
        elif tag in ("thead", "tbody"):
            self.part = ""
        elif tag == "table":
            self.key = ""

    def handle_data(self, data):
        if self.text is not None and not self.label_depth:
            self.text.append(data)


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _header_squeezed(text: str) -> str:
    """A header's words without the signs that set group, title and unit apart."""
    return re.sub(r"[():,]", "", _squeezed(text))


def html_columns(head: list[list[tuple[str, int]]]) -> list[str]:
    """Each column's header: its first row's text (a group's spans its columns) and its second's."""
    rows = [[text for text, span in row for _ in range(span)] for row in head]
    return ["".join(texts) for texts in zip(*rows, strict=True)]


def markdown_tables(summary: str) -> dict[str, dict[str, list]]:
    """Each '## title' section's table: header and rows of (text, struck), Markdown unescaped."""
    found = {}
    for section in summary.split("\n## ")[1:]:
        title, *lines = section.splitlines()
        rows = [line for line in lines if line.startswith("| ")]
        if rows:
            cells = [[_unescaped(c) for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in rows]
            found[title] = {"head": [text for text, _struck in cells[0]], "body": cells[1:]}
    return found


def _unescaped(cell: str) -> tuple[str, bool]:
    text = re.sub(r"\\([\\`*|\[\]])", r"\1", cell).replace("&lt;", "<").replace("&gt;", ">")
    return text.replace("~~", "").strip(), "~~" in text


def rendered(name: str) -> tuple[list, str, str]:
    run = REFERENCES / name
    figures = pd.read_parquet(run / "figures.parquet")
    caveats = pd.read_parquet(run / "caveats.parquet")
    shots = pd.read_parquet(run / "shots.parquet")
    runs = load_runs(sorted(run.glob("engines/*/build.json")), sorted(run.glob("models/*.json")))
    laid_out = lay_out(build_tables(figures), caveat_numbers(caveats, run_wide(figures, caveats)))
    html = render_report(figures, caveats, shots, runs, [], "ref")
    return laid_out, html, render_summary(figures, caveats, "ref")


@pytest.fixture(scope="module", params=RUNS)
def reference(request) -> tuple[list, dict, dict]:
    laid_out, html, summary = rendered(request.param)
    parsed = _HtmlTables()
    parsed.feed(html)
    return laid_out, parsed.tables, markdown_tables(summary)


def test_every_summary_table_has_the_html_tables_columns_and_rows(reference):
    laid_out, html, markdown = reference
    shown = [t for t in laid_out if t.spec.in_summary and t.rows]
    assert set(markdown) - {"Answer", "Claims checked against this run"} == {t.spec.title for t in shown}
    assert {t.spec.key for t in laid_out} <= set(html)
    for laid in shown:
        key, page, summary = laid.spec.key, html[laid.spec.key], markdown[laid.spec.title]
        page_head = [_header_squeezed(h) for h in html_columns(page["head"])]
        assert page_head == [_header_squeezed(h) for h in summary["head"]], key
        assert len(page["body"]) == len(summary["body"]) == len(laid.rows) > 0
        for at, (page_row, summary_row) in enumerate(zip(page["body"], summary["body"], strict=True)):
            squeezed = [
                [(_squeezed(text), struck) for text, struck in row] for row in (page_row, summary_row)
            ]
            assert squeezed[0] == squeezed[1], (key, at)


def test_a_struck_speed_up_is_struck_in_both_with_its_gate():
    laid_out, html, summary = rendered("cpu_cost_model")
    parsed = _HtmlTables()
    parsed.feed(html)
    markdown = markdown_tables(summary)
    for key, title in (("workloads", "Workloads × speculative modes"),):  # fmt: skip
        page = [text for row in parsed.tables[key]["body"] for text, struck in row if struck]
        text = [text for row in markdown[title]["body"] for text, struck in row if struck]
        assert len(page) == len(text) == 3  # recall on synthetic text failed its gate; two lossy modes
        assert sorted(t.rsplit("]", 1)[-1].strip() for t in text) == ["gate failed", "lossy", "lossy"]
        assert all(t.startswith("✗") for t in page + text)
    # The legend names each gate that struck a cell, and only those.
    assert f"✗ = {STRUCK_MEANS}: gate failed = task not done" in summary
    assert "lossy = output not lossless" in summary and "cache hit =" not in summary


def test_names_from_config_are_escaped_in_both_formats():
    name = "<b>m</b>|`x`"
    found, caveats = compute_figures(table(series(cell(model=name, protocol="cold"), [{}, {}])), [], 0.7)
    figures, caveats = pd.DataFrame([f.as_row() for f in found]), pd.DataFrame(caveats)
    html = render_report(figures, caveats, table(series(cell(), [{}])), {"builds": [], "models": []}, [], "t")
    summary = render_summary(figures, caveats, "t")
    assert "<b>m</b>" not in html and "<td>&lt;b&gt;m&lt;/b&gt;|`x`</td>" in html
    assert "<b>m</b>" not in summary and "| &lt;b&gt;m&lt;/b&gt;\\|\\`x\\` |" in summary


def test_every_listed_plot_has_its_drawing_and_its_caption():
    assert list(DRAW) and set(DRAW) == set(PLOT_NAMES)
    for plot in PLOTS:  # one caption, read by the HTML report and by snakemake --report
        assert (REPO / "whichshot" / "report" / "captions" / f"{plot.name}.rst").is_file()
        assert plot.caption


def test_the_workflow_declares_every_listed_plot(tmp_path: Path):
    targets = [f"results/report/{name}.png" for name in PLOT_NAMES]
    planned = run_pipeline(tmp_path, load_config("smoke"), "--dry-run", *targets)
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert re.search(r"^render_report\s+1$", planned.stdout, re.MULTILINE), planned.stdout[-2000:]
    missing = run_pipeline(tmp_path, load_config("smoke"), "--dry-run", "results/report/no_such_plot.png")
    assert missing.returncode != 0 and "MissingRuleException" in missing.stderr + missing.stdout
