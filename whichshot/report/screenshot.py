"""A screenshot of a rendered report, taken by headless Chromium (the README's picture; the report
test's check that the page renders), and the page's layout as Chromium lays it out (its width)."""

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from PIL import Image, PngImagePlugin

# Headless, offline, with no state kept between calls: the page is the only input.
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
]  # fmt: skip
# The README's picture (docs/report.png): the top of the report, its title and headline table.
README_WIDTH, README_HEIGHT = 1280, 1000


def chromium() -> str:
    """The Chromium executable on PATH."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise FileNotFoundError("headless Chromium is needed: apt-get install -y chromium")
    return found


def screenshot(html: Path, png: Path, width: int, height: int) -> None:
    """Write the top width x height pixels of the page html as it renders to png."""
    with tempfile.TemporaryDirectory() as profile:
        argv = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                f"--screenshot={Path(png).resolve()}", Path(html).resolve().as_uri()]  # fmt: skip
        subprocess.run(argv, capture_output=True, timeout=300, check=True)
    _note_source(Path(png), Path(html))


# The PNG text chunk naming the page a picture was drawn from (its sha256): the README test checks
# the picture is current by it, not by pixels, which depend on the fonts installed.
SOURCE_KEY = "whichshot:drawn_from_sha256"


def page_sha256(html: Path) -> str:
    return hashlib.sha256(Path(html).read_bytes()).hexdigest()


def _note_source(png: Path, html: Path) -> None:
    with Image.open(png) as image:
        image.load()
        info = PngImagePlugin.PngInfo()
        info.add_text(SOURCE_KEY, page_sha256(html))
        image.save(png, pnginfo=info)


def drawn_from(png: Path) -> str | None:
    """The sha256 of the page a screenshot was drawn from, as screenshot() noted it (None if not)."""
    with Image.open(png) as image:
        return image.info.get(SOURCE_KEY)


# Run in a copy of the page once it is laid out: its widths, where its sections start, and the
# elements that reach past the window (what makes it scroll sideways).
_LAYOUT_SCRIPT = """<script>(function () {
  var width = window.innerWidth, past = [], sections = {};
  function scrolled(e) {  // inside a box that scrolls or clips: it does not widen the page
    for (var a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== "visible") return true;
    }
    return false;
  }
  document.querySelectorAll("body *").forEach(function (e) {
    if (e.getBoundingClientRect().right > width + 0.5 && !scrolled(e) && past.length < 20) {
      past.push(e.tagName.toLowerCase() + "." + e.className + "#" + e.id);
    }
  });
  document.querySelectorAll("h2[id]").forEach(function (h) {
    sections[h.id] = h.getBoundingClientRect().top + window.scrollY;
  });
  var answer = document.getElementById("answer");
  var answerBottom = answer ? answer.getBoundingClientRect().bottom + window.scrollY : null;
  var out = document.createElement("pre"); out.id = "__whichshot_layout";
  out.textContent = JSON.stringify({scroll_width: document.documentElement.scrollWidth, window_width: width,
    window_height: window.innerHeight, scroll_height: document.documentElement.scrollHeight,
    past_the_window: past, section_top_px: sections, answer_bottom_px: answerBottom});
  document.body.appendChild(out);
})();</script>"""


def page_layout(html: Path, width: int, height: int = 1000) -> dict[str, Any]:
    """How headless Chromium lays out the page html in a width x height window: scroll_width and
    scroll_height (px), past_the_window (elements wider than the window), section_top_px (each
    h2 by id) and answer_bottom_px (where the answer block ends; None without one)."""
    page = Path(html).read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as work:
        probe = Path(work) / "page.html"
        probe.write_text(page.replace("</body>", _LAYOUT_SCRIPT + "</body>"), encoding="utf-8")
        window = f"--window-size={width},{height}"
        argv = [
            chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={work}/profile",
            window,
            "--dump-dom",
            probe.as_uri(),
        ]
        dom = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True).stdout
    found = re.search(r'<pre id="__whichshot_layout">(.*?)</pre>', dom, re.DOTALL)
    if not found:
        raise RuntimeError("Chromium returned the page without its layout (did the script run?)")
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
