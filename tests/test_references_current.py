"""Every committed reference is what this checkout's code derives from its own shots (issue 42): a
change to a figure, a caveat or the summary's text that is not re-derived into results/reference
fails here, naming the reference and the first lines that differ. The measurements are never re-run:
only the arithmetic on top of them (tools/rederive_reference.py --check does the same by hand)."""

import os
import sys
from concurrent.futures import ProcessPoolExecutor

import pytest

from tests.pipeline import REPO

# Minutes of pandas: every committed reference derived again (the full suite runs it).
pytestmark = pytest.mark.e2e

sys.path.insert(0, str(REPO / "tools"))
try:
    import rederive_reference
finally:
    sys.path.remove(str(REPO / "tools"))

REFERENCES = rederive_reference.references()


def test_every_reference_folder_re_derives_from_its_own_files():
    # slurm_local_nodes once lacked the files its figures came from; every reference has its shots.
    assert len(REFERENCES) >= 27
    assert REPO / "results" / "reference" / "slurm_local_nodes" in REFERENCES


def test_every_committed_reference_is_what_this_code_derives():
    # One derivation per core: 27 references are minutes of pandas on a 2-core machine.
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        found = dict(zip(REFERENCES, pool.map(rederive_reference.differences, REFERENCES), strict=True))
    stale = {run_dir: lines for run_dir, lines in found.items() if lines}
    assert not stale, "\n".join(
        f"{run_dir.relative_to(REPO)}: {len(lines)} differences, first: {lines[0]}\n"
        f"  re-derive it: python tools/rederive_reference.py {run_dir.relative_to(REPO)}"
        for run_dir, lines in stale.items()
    )


def test_the_tool_answers_help_and_names_a_folder_without_shots(tmp_path):
    import subprocess

    tool = [sys.executable, str(REPO / "tools" / "rederive_reference.py")]
    helped = subprocess.run([*tool, "--help"], capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and "--check" in helped.stdout and "Traceback" not in helped.stderr
    missing = subprocess.run([*tool, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip() == (
        f"{tmp_path}: no shots.parquet there (RUN_DIR is a finished run's folder)"
    )
