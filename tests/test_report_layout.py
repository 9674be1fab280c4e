"""The default report as a reader meets it (issue 32): it fits 1280 px in headless Chromium, the
checked claims follow this run's results with the rest in a collapsed appendix, each article named
by its title, short cell labels with the id on hover, a glossary, no section twice, and a summary.md
of at most 15 KB that opens with a llama-bench-style header. Rendered from the committed reference
run's measurements by this checkout's code (tools/rederive_reference.py): no pipeline run."""

import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from tests.pipeline import REPO
from tests.system_packages import CHROMIUM
from whichshot.report.claims import CHECKED
from whichshot.report.render import short_cell
from whichshot.report.screenshot import page_layout

REFERENCE = REPO / "results" / "reference" / "cpu_first_run"
WIDTH_PX = 1280
SUMMARY_MOST_BYTES = 15_000


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("layout") / "cpu_first_run"
    shutil.copytree(REFERENCE, copy, ignore=shutil.ignore_patterns("report"))
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import rederive_reference
    finally:
        sys.path.remove(str(REPO / "tools"))
    rederive_reference.main(copy, "default-cpu")
    return copy


@pytest.fixture(scope="module")
def page(run) -> str:
    return (run / "report" / "index.html").read_text(encoding="utf-8")


class _Details(HTMLParser):
    """The id of each element, and for each the open/closed state of the <details> around it."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[bool] = []  # one entry per open <details>: has it the open attribute?
        self.inside: dict[str, list[bool]] = {}

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        if tag == "details":
            self.stack.append("open" in found)
        if found.get("id"):
            self.inside[found["id"]] = list(self.stack)

    def handle_endtag(self, tag):
        if tag == "details" and self.stack:
            self.stack.pop()


@CHROMIUM.needed()
def test_the_report_fits_1280_px_without_sideways_scroll(run):
    layout = page_layout(run / "report" / "index.html", WIDTH_PX)
    assert layout["window_width"] == WIDTH_PX
    assert layout["scroll_width"] <= WIDTH_PX, layout["past_the_window"]
    assert layout["past_the_window"] == []  # wide tables scroll inside their own box
    tops = layout["section_top_px"]
    assert tops["headline"] < tops["claims"] < tops["claims-appendix"]
    # The answer is read before anything else: the whole block on the first screen.
    assert layout["answer_bottom_px"] is not None
    assert layout["answer_bottom_px"] <= layout["window_height"] < tops["headline"]


def test_checked_claims_follow_the_results_and_the_rest_sit_in_a_closed_appendix(run, page):
    verdicts = pd.read_parquet(run / "claims.parquet")
    checked = verdicts[verdicts["status"].isin(CHECKED)]["claim_id"]
    rest = verdicts[~verdicts["status"].isin(CHECKED)]["claim_id"]
    assert len(checked) and len(rest)
    for results in ('id="headline"', 'id="workloads"', 'id="plots"'):
        assert page.index(results) < page.index('id="claims"')
    appendix = page.index('id="claims-appendix"')
    assert all(page.index(f'id="claim-{c}"') < appendix for c in checked)
    assert all(page.index(f'id="claim-{c}"') > appendix for c in rest)
    parsed = _Details()
    parsed.feed(page)
    assert all(parsed.inside[f"claim-{c}"] == [False] for c in rest)  # collapsed
    assert all(parsed.inside[f"claim-{c}"] == [] for c in checked)  # shown
    claims = page[page.index('id="claims"') :]
    assert "tolerance" in claims and re.search(r"ours [+-]\d", claims)  # direction and tolerance


def test_each_seed_article_is_named_by_its_title_not_by_a_path(run, page):
    claims = page[page.index('id="claims"') :]
    assert "单张 3090 每秒 381 token，是真的吗：拆解大模型的照抄式加速" in claims
    assert "「1K、2K 领先，4K 基本打平。」" in claims
    assert not re.search(r"shared/seeds|seeds/\d{3}_|claims/seed-\d+\.yaml", page)
    summary = (run / "report" / "summary.md").read_text(encoding="utf-8")
    assert "单张 3090 每秒 381 token" in summary and "shared/seeds" not in summary


def test_cell_labels_are_short_with_the_full_id_on_hover(page):
    cell_id = (
        "llama_cpp/smollm2_135m/continue_text/real/p256/warm/rest0s/pre0s/ctx2048/same/none/engine_default"
    )
    assert short_cell(cell_id) == "p256 · warm"
    assert short_cell(
        "e/m/verbatim_recall/synthetic/warm/rest3s/pre0s/ctx2048/same/ngram_simple/engine_default"
    ) == ("verbatim_recall · synthetic · warm · rest3s · ngram_simple")
    assert f'title="{cell_id}/&lt;metric&gt;">p256 · warm</span>' in page


def test_a_glossary_and_no_section_twice(page):
    glossary = page[page.index('<dl class="glossary">') : page.index("</dl>")]
    for word in ("cold shot", "warm series", "cell", "measured", "engine-reported", "derived", "inferred",
                 "assumed"):  # fmt: skip
        assert f"{word}</dt>" in glossary, word
    sections = re.findall(r'<h2 id="([^"]+)"', page)
    assert len(sections) == len(set(sections))
    listed = re.findall(r'<td class="what">.*?<span class="fid">([^<]+)</span>', page)
    assert listed and len(listed) == len(set(listed))  # an inferred figure is listed once, not twice


def test_summary_is_small_standalone_and_opens_with_what_ran_where(run):
    summary = (run / "report" / "summary.md").read_bytes()
    assert len(summary) <= SUMMARY_MOST_BYTES, len(summary)
    text = summary.decode("utf-8")
    lines = text.splitlines()
    assert lines[2] == "| model | size | params | quant | backend | threads | build |"
    smollm = next(line for line in lines if line.startswith("| smollm2_135m"))
    for fact in ("93.81 MiB", "134.52 M", "| Q4_1 |", "| cpu |", "| 2 |", "00041226bdde", "b11312",
                 "commit 0c1e57098bba"):  # fmt: skip
        assert fact in smollm, fact
    assert "host: vm · AMD EPYC · 2 cores · GPU: none recorded" in text
    assert not re.search(r"</?[a-zA-Z][^>]*>", text)  # plain Markdown, pasteable into an issue
    assert "## Claims checked against this run" in text and "index.html" in text
