"""Re-derive figures, caveats and the report of a finished run directory with this checkout's code.

A reviewer's tool: the measurements (shots.parquet, bench/*.json) stay as recorded; only the
arithmetic on top of them is re-run.  Usage: python tools/rederive_reference.py RUN_DIR RUN_ID
where RUN_DIR holds shots.parquet, engines/*/build.json, models/*.json and optionally bench/.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from whichshot.figures.table import write_figures_from_files  # noqa: E402
from whichshot.report.render import write_report_from_files  # noqa: E402

WARM_FRACTION = 0.7


def main(run_dir: Path, run_id: str) -> None:
    paths = {
        "shots": run_dir / "shots.parquet",
        "figures": run_dir / "figures.parquet",
        "caveats": run_dir / "caveats.parquet",
        "builds": sorted(run_dir.glob("engines/*/build.json")),
        "models": sorted(run_dir.glob("models/*.json")),
    }
    # bench/<job>.json: a series' llama-bench brackets; bench/<engine>/<model>.json: an older run's.
    bench = sorted([*run_dir.glob("bench/*.json"), *run_dir.glob("bench/*/*.json")])
    write_figures_from_files(paths["shots"], bench, WARM_FRACTION, paths["figures"], paths["caveats"])
    write_report_from_files(paths, run_dir / "report", run_id)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
