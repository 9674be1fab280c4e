"""The package works as a built wheel, away from the source tree: its schemas, report template and
plot captions travel inside it (the library once read workflow/schemas by a relative path)."""

import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.pipeline import REPO

SCRIPT = """
import pandas as pd, whichshot
from pathlib import Path
from tests_copy.shot_tables import cell, series, table
from whichshot.config import check_config
from whichshot.figures.table import compute_figures
from whichshot.report.plots import draw_plots
from whichshot.report.render import render_report
assert "site" in whichshot.__file__ or "wheel" in whichshot.__file__, whichshot.__file__
figures, caveats = compute_figures(table(series(cell(), [{}, {}, {}])), [], 0.7)
frame = pd.DataFrame([f.as_row() for f in figures])
plots = draw_plots(frame, Path("plots"))
html = render_report(frame, pd.DataFrame(caveats), table(series(cell(), [{}])), {"builds": [], "models": []},
                     plots, "wheel")
assert "data-figure-id" in html and plots[0].caption
print("ok", len(figures))
"""


def source_copy(destination):
    """What a wheel is built from, copied: pip's build would leave build/ and *.egg-info in the tree."""
    destination.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, destination / name)
    for package in ("whichshot", "engines"):
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(REPO / package, destination / package, ignore=ignore)
    return destination


@pytest.mark.e2e  # builds a wheel with pip
def test_a_built_wheel_carries_its_schemas_template_and_captions(tmp_path):
    source = source_copy(tmp_path / "source")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
        ],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("whichshot-*.whl")
    site = tmp_path / "wheel"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(site)
    for needed in (
        "whichshot/schemas/shots.schema.yaml",
        "whichshot/schemas/figures.schema.yaml",
        "whichshot/report/templates/index.html.j2",
        "whichshot/report/captions/clock_ratio.rst",
        "engines/llama_cpp.py",
    ):
        assert needed in names, needed
    (site / "tests_copy").mkdir()
    (site / "tests_copy" / "shot_tables.py").write_text((REPO / "tests" / "shot_tables.py").read_text())
    work = tmp_path / "elsewhere"
    work.mkdir()
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=work,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("ok")
