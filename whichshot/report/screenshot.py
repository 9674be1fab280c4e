"""A screenshot of a rendered report, taken by headless Chromium (the README's picture; the report
test's check that the page renders)."""

import shutil
import subprocess
import tempfile
from pathlib import Path

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
