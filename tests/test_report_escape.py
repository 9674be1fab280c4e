"""Model output is untrusted text: escaped in the HTML, kept out of (and escaped in) summary.md."""

from html.parser import HTMLParser

import pandas as pd
import pytest

from tests.report_run import finished_report_run
from whichshot.report.format import md
from whichshot.report.render import load_runs, render_report
from whichshot.report.summary import render_summary

pytestmark = pytest.mark.e2e
ATTACK = "<script>alert(1)</script>"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict:
    run = finished_report_run(tmp_path_factory) / "results"
    shots = pd.read_parquet(run / "shots.parquet")
    shots["output_text"] = f"def f():\n    return 1\n{ATTACK} | `x` [y](z)"
    caveats = pd.read_parquet(run / "caveats.parquet")
    planted = {"caveat_id": "failed_shots", "sentence": f"engine said {ATTACK} | `x`", "figure_ids": []}
    caveats.loc[len(caveats)] = {**dict.fromkeys(caveats.columns), "shot_ids": [], "source_ids": [],
                                 "columns": [], "across": "", **planted}  # fmt: skip
    runs = load_runs(sorted(run.glob("engines/*/build.json")), sorted(run.glob("models/*.json")))
    return {"shots": shots, "caveats": caveats, "figures": pd.read_parquet(run / "figures.parquet"),
            "runs": runs}  # fmt: skip


def test_model_output_is_escaped_in_the_html(tables):
    html = render_report(tables["figures"], tables["caveats"], tables["shots"], tables["runs"], [], "t")
    assert ATTACK not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    parsed = _Tags()
    parsed.feed(html)
    assert "script" not in parsed.tags
    assert any(ATTACK in chunk for chunk in parsed.text)  # shown to the reader as text


def test_summary_keeps_model_output_out_and_escapes_the_rest(tables):
    summary = render_summary(tables["figures"], tables["caveats"], "t")
    assert "return 1" not in summary
    assert ATTACK not in summary and "<script" not in summary
    assert "engine said &lt;script&gt;alert(1)&lt;/script&gt; \\| \\`x\\`" in summary


def test_markdown_cell_escaping():
    assert md("a|b") == "a\\|b"
    assert md("`rm -rf`") == "\\`rm -rf\\`"
    assert md("<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"
    assert md("[link](http://x)") == "\\[link\\](http://x)"
    assert md("two\nlines") == "two lines"
    assert md("smollm2_135m") == "smollm2_135m"
