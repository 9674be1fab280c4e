"""Re-derive figures, caveats and the report of a finished run directory with this checkout's code.

A reviewer's tool: the measurements (shots.parquet, bench/*.json) stay as recorded; only the
arithmetic on top of them is re-run, with the statistics settings of the run's own config.yaml
(protocol.warm_fraction, protocol.verdict_margin; the defaults where it has none).

Usage:
  python tools/rederive_reference.py RUN_DIR [RUN_ID]   re-derive one run in place
  python tools/rederive_reference.py --all              every committed reference, in place
  python tools/rederive_reference.py --check [RUN_DIR ...]
      derive each run (default: every committed reference) into a scratch folder and list every
      figure, caveat and summary.md line that differs from what is committed; exit 1 if any does.

RUN_DIR holds shots.parquet and optionally engines/*/build.json, models/*.json, bench/,
hardware/probe*.json and traffic/*.json (then the ceilings too) and config.yaml naming claims files
(then the claims' verdicts too). RUN_ID defaults to the shots' own run_id.
"""

import argparse
import math
import numbers
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from whichshot.claims.run import probe_files, verdicts, write_verdicts  # noqa: E402
from whichshot.figures.constants import config_default  # noqa: E402
from whichshot.figures.table import write_figures_from_files  # noqa: E402
from whichshot.report.render import write_report_from_files, write_summary_from_files  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
REFERENCES = REPO / "results" / "reference"
# What a check compares: the tables' rows by their id, and the summary's text.
COMPARED = {"figures.parquet": "figure_id", "caveats.parquet": "caveat_id"}
# Floats agree within this relative tolerance: numpy's vectorised loops may differ in the last bit
# between processors and versions (issue 48: 1.8727546713893215 vs ...217 on another machine), and a
# check of the arithmetic must not be a check of the machine. Integers and texts must match exactly.
RELATIVE_TOLERANCE = 1e-9
ABSOLUTE_TOLERANCE = 1e-12  # for figures that are 0 on one side and a rounding residue on the other
SUMMARY = Path("report") / "summary.md"


def main(run_dir: Path, run_id: str | None = None, whole_report: bool = True) -> None:
    """Re-derive run_dir in place: its figures, caveats, claims and report (or summary.md alone)."""
    paths = {
        "shots": run_dir / "shots.parquet",
        "figures": run_dir / "figures.parquet",
        "caveats": run_dir / "caveats.parquet",
        "builds": sorted(run_dir.glob("engines/*/build.json")),
        "models": sorted(run_dir.glob("models/*.json")),
    }
    # bench/<job>.json: a series' llama-bench brackets; bench/<engine>/<model>.json: an older run's.
    bench = sorted([*run_dir.glob("bench/*.json"), *run_dir.glob("bench/*/*.json")])
    hardware = probe_files(run_dir)
    traffic = sorted(run_dir.glob("traffic/*.json"))
    after = sorted(run_dir.glob("hardware/after/*.json"))  # the engine kernels' pass after the grid
    write_figures_from_files(paths["shots"], bench, run_statistic(run_dir, "warm_fraction"), paths["figures"],
                             paths["caveats"], hardware, traffic, after,
                             verdict_margin=run_statistic(run_dir, "verdict_margin"))  # fmt: skip
    claims = [REPO / path for path in _config(run_dir).get("claims", [])]
    if claims:
        paths["claims"] = run_dir / "claims.parquet"
        write_verdicts(verdicts(claims, paths["figures"], paths["shots"], hardware), paths["claims"])
    write = write_report_from_files if whole_report else write_summary_from_files
    write(paths, run_dir / "report", run_id or _run_id(paths["shots"]))


def _config(run_dir: Path) -> dict:
    path = run_dir / "config.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}


def run_statistic(run_dir: Path, key: str) -> float:
    """A protocol statistic (warm_fraction, verdict_margin) as the run's config.yaml set it, else the
    config schema's default."""
    value = (_config(run_dir).get("protocol") or {}).get(key)
    return config_default("protocol", key) if value is None else value


def _run_id(shots: Path) -> str:
    ids = pd.read_parquet(shots, columns=["run_id"])["run_id"].dropna().unique()
    return str(ids[0]) if len(ids) else shots.parent.name


def references() -> list[Path]:
    """Every committed reference run: each folder under results/reference with its shots."""
    return sorted(path.parent for path in REFERENCES.rglob("shots.parquet"))


def differences(run_dir: Path) -> list[str]:
    """What a fresh derivation of run_dir changes: one line per figure, caveat or summary line."""
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch) / run_dir.name
        shutil.copytree(run_dir, fresh, ignore=shutil.ignore_patterns("report", "*.png"))
        main(fresh, whole_report=False)
        found = [
            line for name, key in COMPARED.items() for line in _table_differences(run_dir, fresh, name, key)
        ]
        return found + _summary_differences(run_dir, fresh)


def _table_differences(committed: Path, fresh: Path, name: str, key: str) -> list[str]:
    old, new = (_rows(folder / name, key) for folder in (committed, fresh))
    lines = [f"{name}: {k} only in the fresh derivation" for k in sorted(new.keys() - old.keys())]
    lines += [f"{name}: {k} only in the committed table" for k in sorted(old.keys() - new.keys())]
    for k in sorted(old.keys() & new.keys()):
        changed = [column for column in new[k] if not values_agree(old[k].get(column), new[k][column])]
        lines += [f"{name}: {k} {column}: {old[k].get(column)!r} -> {new[k][column]!r}" for column in changed]
    return lines


def _rows(path: Path, key: str) -> dict[str, dict]:
    if not path.is_file():
        return {}
    return {row[key]: row for row in pd.read_parquet(path).to_dict("records")}


def values_agree(old, new) -> bool:
    """Two cells agree: floats within RELATIVE_TOLERANCE, arrays element by element, the rest as text."""
    if _is_float(old) and _is_float(new):
        if math.isnan(old) or math.isnan(new):
            return math.isnan(old) and math.isnan(new)
        return math.isclose(old, new, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE)
    if isinstance(old, numbers.Integral) and isinstance(new, numbers.Integral):
        return int(old) == int(new)
    if _is_sequence(old) and _is_sequence(new):
        return len(old) == len(new) and all(values_agree(a, b) for a, b in zip(old, new, strict=True))
    return _text(old) == _text(new)


def _is_float(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral | bool)


def _is_sequence(value) -> bool:
    return hasattr(value, "__len__") and not isinstance(value, str | bytes | dict)


def _text(value) -> str:
    """A cell as comparable text (arrays and lists alike; NaN and None alike)."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return repr(list(value)) if _is_sequence(value) else repr(value)


def _summary_differences(committed: Path, fresh: Path) -> list[str]:
    old = (
        (committed / SUMMARY).read_text(encoding="utf-8").splitlines()
        if (committed / SUMMARY).is_file()
        else []
    )
    new = (fresh / SUMMARY).read_text(encoding="utf-8").splitlines()
    if old == new:
        return []
    first = next(
        (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new))
    )
    return [f"summary.md differs from line {first + 1}: {old[first : first + 1]} -> {new[first : first + 1]}"]


def check(run_dirs: list[Path]) -> int:
    stale = 0
    for run_dir in run_dirs:
        found = differences(run_dir)
        stale += bool(found)
        print(f"{run_dir.relative_to(REPO) if run_dir.is_relative_to(REPO) else run_dir}: "
              f"{'current' if not found else f'{len(found)} differences'}")  # fmt: skip
        for line in found[:20]:
            print(f"  {line}")
    return 1 if stale else 0


def _arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.strip().splitlines()[0],
        epilog="\n".join(__doc__.strip().splitlines()[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--all", action="store_true", help="re-derive every committed reference in place")
    what.add_argument("--check", action="store_true", help="list differences, write nothing; exit 1 if any")
    parser.add_argument("paths", nargs="*", metavar="RUN_DIR [RUN_ID]", help="a run folder (and its run id)")
    args = parser.parse_args(argv)
    if args.all and args.paths:
        parser.error("--all takes no RUN_DIR")
    if not (args.all or args.check) and not 1 <= len(args.paths) <= 2:
        parser.error("give RUN_DIR [RUN_ID], --all or --check [RUN_DIR ...]")
    return args


def cli(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.check:
        return check([Path(a).resolve() for a in args.paths] or references())
    if args.all:
        for reference in references():
            print(reference.relative_to(REPO), flush=True)
            main(reference)
        return 0
    run_dir = Path(args.paths[0])
    if not (run_dir / "shots.parquet").is_file():
        print(f"{run_dir}: no shots.parquet there (RUN_DIR is a finished run's folder)", file=sys.stderr)
        return 2
    main(run_dir, args.paths[1] if len(args.paths) == 2 else None)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
