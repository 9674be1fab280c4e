"""Whether a refactoring left the arithmetic alone: derive the figures and caveats of committed
reference runs with the code of an older revision and with this checkout, and compare them exactly
(columns only one side has are named, not compared).

Usage: python tools/derivation_equal.py OLD_REV REF [REF ...]
  REF: a run under results/reference/, e.g. cpu_cost_model or h200/seed_000
Prints one line per run and table: rows old/new, the columns only the new side has, and "equal" or
the first difference. Nothing under results/ is written (the derivations go to a temporary folder).
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
DERIVE = """
import sys
from pathlib import Path
from whichshot.claims.run import probe_files
from whichshot.figures.table import write_figures_from_files
run_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
bench = sorted([*run_dir.glob("bench/*.json"), *run_dir.glob("bench/*/*.json")])
traffic, after = sorted(run_dir.glob("traffic/*.json")), sorted(run_dir.glob("hardware/after/*.json"))
write_figures_from_files(run_dir / "shots.parquet", bench, 0.7, out / "figures.parquet",
                         out / "caveats.parquet", probe_files(run_dir), traffic, after)
"""


def derive(code_root: Path, run_dir: Path, out: Path) -> None:
    out.mkdir(parents=True)
    env = {"PYTHONPATH": str(code_root), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"}
    subprocess.run([sys.executable, "-c", DERIVE, str(run_dir), str(out)], check=True, env=env, cwd=code_root)


def compare(old: pd.DataFrame, new: pd.DataFrame) -> str:
    only_new = [column for column in new.columns if column not in old.columns]
    shared = [column for column in old.columns if column in new.columns]
    try:
        pd.testing.assert_frame_equal(old[shared], new[shared], check_exact=True)
        verdict = "equal"
    except AssertionError as difference:
        verdict = "DIFFERENT: " + " ".join(str(difference).split())[:300]
    return f"rows {len(old)}/{len(new)}, only new: {only_new or 'none'}: {verdict}"


def main(old_rev: str, refs: list[str]) -> int:
    different = 0
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(old_tree), old_rev],
                       check=True)  # fmt: skip
        try:
            for ref in refs:
                run_dir = REPO / "results" / "reference" / ref
                sides = {side: Path(tmp) / side / ref for side in ("old_out", "new_out")}
                derive(old_tree, run_dir, sides["old_out"])
                derive(REPO, run_dir, sides["new_out"])
                for table in ("figures", "caveats"):
                    old, new = (pd.read_parquet(path / f"{table}.parquet") for path in sides.values())
                    line = compare(old, new)
                    different += "DIFFERENT" in line
                    print(f"{ref} {table}: {line}", flush=True)
        finally:
            remove = ["git", "-C", str(REPO), "worktree", "remove", "--force", str(old_tree)]
            subprocess.run(remove, check=True)
    return 1 if different else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1], sys.argv[2:]))
