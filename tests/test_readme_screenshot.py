"""The README starts with the picture: short, its two commands verbatim, its screenshot of the default
report committed and current, and every page it links to present."""

import re

import numpy as np
from PIL import Image

from tests.pipeline import REPO
from whichshot.report.screenshot import README_HEIGHT, README_WIDTH, screenshot

README = REPO / "README.md"
PICTURE = REPO / "docs" / "report.png"
DEFAULT_REPORT = REPO / "results" / "reference" / "cpu_first_run" / "report" / "index.html"
RUN = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && snakemake --cores 1"
TEST = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && pytest"  # .ci/run's
# Share of pixels that may differ between the committed picture and one redrawn from the same report
# with the same settings (measured: 0.0 on the machine that drew it; another report differs in ~0.17).
MAX_DIFFERING_PIXELS = 0.01
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


def test_the_picture_is_the_default_report_drawn_with_the_tool_settings(tmp_path):
    redrawn = tmp_path / "report.png"
    screenshot(DEFAULT_REPORT, redrawn, README_WIDTH, README_HEIGHT)
    with Image.open(redrawn) as image:
        assert image.format == "PNG"
    new, committed = _pixels(redrawn), _pixels(PICTURE)
    assert new.shape == committed.shape == (README_HEIGHT, README_WIDTH, 3)
    colours = np.unique(new.reshape(-1, 3), axis=0)
    assert len(colours) > 100  # text, rules, the provenance badges: not a blank page
    assert np.mean(new.min(axis=2) < 200) > 0.02  # dark enough pixels to be text
    differing = np.mean((new != committed).any(axis=2))
    assert differing < MAX_DIFFERING_PIXELS, (
        f"{differing:.3f} of docs/report.png's pixels differ from the default report: redraw it with "
        "python tools/report_screenshot.py results/reference/cpu_first_run/report/index.html docs/report.png"
    )
