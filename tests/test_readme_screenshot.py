"""The README starts with the picture: short, its two commands verbatim, its screenshot of the default
report committed and current, and every page it links to present."""

import re

import numpy as np
from PIL import Image

from tests.pipeline import REPO
from tests.system_packages import CHROMIUM
from whichshot.report.screenshot import README_HEIGHT, README_WIDTH, drawn_from, page_sha256, screenshot

README = REPO / "README.md"
PICTURE = REPO / "docs" / "report.png"
DEFAULT_REPORT = REPO / "results" / "reference" / "cpu_default_pair" / "report" / "index.html"
RUN = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && snakemake --cores 1"
TEST = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && pytest"  # .ci/run's
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _pixels(png) -> np.ndarray:
    return np.asarray(Image.open(png).convert("RGB"))


def test_readme_is_short_and_keeps_its_two_commands_verbatim():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    for command in (RUN, TEST):
        assert f"```sh\n{command}\n```" in text, command


def test_readme_embeds_the_committed_report_picture():
    assert re.search(r"^!\[[^\]]+\]\(docs/report\.png\)$", README.read_text(encoding="utf-8"), re.MULTILINE)
    assert PICTURE.is_file()
    with Image.open(PICTURE) as image:
        assert image.format == "PNG" and image.size == (README_WIDTH, README_HEIGHT)


def test_every_page_the_readme_and_the_docs_link_to_exists():
    linked_docs = set()
    for page in [README, *sorted((REPO / "docs").glob("*.md"))]:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a URL or an anchor on the same page
            path = (page.parent / target.partition("#")[0]).resolve()
            assert path.exists(), f"{page.relative_to(REPO)} links to {target}, which does not exist"
            if path.parent == REPO / "docs" and path.suffix == ".md":
                linked_docs.add(path)
    assert linked_docs == set((REPO / "docs").glob("*.md"))  # every page is linked


def test_the_picture_is_drawn_from_the_current_default_report():
    """Current by provenance, not by pixels: pixels hang on the fonts installed (a machine with CJK
    fonts draws the claims' quotes in other glyphs), the page the picture was drawn from does not."""
    assert drawn_from(PICTURE) == page_sha256(DEFAULT_REPORT), (
        "docs/report.png was not drawn from the default report as it is now: redraw it with "
        "python tools/report_screenshot.py results/reference/cpu_first_run/report/index.html docs/report.png"
    )


@CHROMIUM.needed()
def test_the_tool_draws_a_picture_of_the_page_whatever_the_fonts(tmp_path):
    redrawn = tmp_path / "report.png"
    screenshot(DEFAULT_REPORT, redrawn, README_WIDTH, README_HEIGHT)
    assert drawn_from(redrawn) == page_sha256(DEFAULT_REPORT)
    with Image.open(redrawn) as image:
        assert image.format == "PNG" and image.size == (README_WIDTH, README_HEIGHT)
    new = _pixels(redrawn)
    colours = np.unique(new.reshape(-1, 3), axis=0)
    assert len(colours) > 100  # text, rules, the provenance badges: not a blank page
    assert np.mean(new.min(axis=2) < 200) > 0.02  # dark enough pixels to be text
