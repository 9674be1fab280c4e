"""Where a run's minutes went, by phase (whichshot/measure/run_phases.py says how each is counted).

Usage: python tools/run_phases.py RUN_DIR   (RUN_DIR is a results/ folder or a reference run)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from whichshot.measure.run_phases import run_phases  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    table = run_phases(Path(argv[1]))
    print(table.to_string())
    print(f"\nall phases: {table['seconds'].sum():.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
