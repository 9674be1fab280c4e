"""Write the README's picture of a report: the top of REPORT_HTML (its title and headline table) as
headless Chromium renders it in a README_WIDTH x README_HEIGHT window, nothing cropped after.

Usage: python tools/report_screenshot.py REPORT_HTML OUT_PNG
e.g.   python tools/report_screenshot.py results/reference/cpu_default_pair/report/index.html docs/report.png
"""

import sys
from pathlib import Path

from whichshot.report.screenshot import README_HEIGHT, README_WIDTH, screenshot


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    html, png = Path(argv[0]), Path(argv[1])
    if not html.is_file():
        print(f"no report at {html}", file=sys.stderr)
        return 1
    png.parent.mkdir(parents=True, exist_ok=True)
    screenshot(html, png, README_WIDTH, README_HEIGHT)
    print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
