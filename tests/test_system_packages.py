"""The README's test command passes on a fresh machine (issue 43): a test that needs a system package
skips, naming the line that installs it; the README names each package and what it adds; .ci/run
installs each, so CI runs every test."""

import ast
import re

from tests.pipeline import REPO
from tests.system_packages import CHROMIUM, OPTIONAL, SLURM

# Calls that start Chromium (whichshot.report.screenshot): a test making one needs CHROMIUM.
CHROMIUM_CALLS = {"screenshot", "page_layout", "chromium"}


def test_a_missing_package_skips_its_tests_with_the_line_that_installs_it(monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert CHROMIUM.skip_reason() == "chromium not installed: apt-get install -y chromium"
    assert SLURM.skip_reason().startswith("munged, slurmctld, slurmd, sbatch")
    assert SLURM.skip_reason().endswith(": apt-get install -y slurmctld slurmd slurm-client munge")


def test_every_test_that_starts_chromium_is_marked_to_need_it():
    unmarked = []
    for path in sorted((REPO / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
                continue
            calls = {
                c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
            }
            marked = any(ast.unparse(d) == "CHROMIUM.needed()" for d in node.decorator_list)
            if calls & CHROMIUM_CALLS and not marked:
                unmarked.append(f"{path.name}::{node.name}")
    assert unmarked == []


def test_the_readme_names_each_package_and_ci_installs_it():
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    installed = {name for line in re.findall(r"apt-get install (.*)", ci) for name in line.split()}
    for package in OPTIONAL:
        assert f"`{package.install}`" in readme, package.install
        assert set(package.packages) <= installed, package.packages
