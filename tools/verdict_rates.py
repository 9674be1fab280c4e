"""Print the verdict's error rates and power at the shapes the shipped configs use (the numbers behind
tests/test_verdict_error_rates.py and docs/report.md): per shape and spread, how often it says
"differs" with no difference, with one as large as the margin, and with a true 10 % effect, and how
often a repeat's point falls inside a run's interval.

Usage: python tools/verdict_rates.py [--sims N]
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from whichshot.config import config_as_run  # noqa: E402
from whichshot.figures.verdict_sim import SPREADS, config_shapes, repeat_coverage, verdict_rates  # noqa: E402

MARGIN = 0.02  # the default verdict_margin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=10_000)
    sims = parser.parse_args(argv).sims
    configs = sorted((ROOT / "config").glob("*.yaml"))
    shapes = sorted(
        {shape for path in configs for shape in config_shapes(config_as_run(path))},
        key=lambda s: (s.side_processes, s.side_shots, s.reference_processes, s.reference_shots),
    )
    print(f"margin ±{MARGIN:.0%}, {sims} draws each; shape = processes x shots kept, side vs reference")
    print(
        "shape\tbetween\twithin\ttails\tslow\tdiffers@0\tdiffers@margin\tdiffers@-10%\tsame@0\trepeat_cover"
    )
    for shape in shapes:
        for spread in SPREADS:
            null = verdict_rates(shape, spread, 0.0, MARGIN, sims, seed=41)
            at_margin = verdict_rates(shape, spread, MARGIN, MARGIN, sims, seed=41)
            power = verdict_rates(shape, spread, -0.10, MARGIN, sims, seed=47)
            cover = repeat_coverage(shape, spread, sims, seed=53)
            size = (f"{shape.side_processes}x{shape.side_shots} vs "
                    f"{shape.reference_processes}x{shape.reference_shots}")  # fmt: skip
            print(f"{size}\t{spread.between:g}\t{spread.within:g}\t{spread.tails_df or '-'}\t"
                  f"{spread.slow_share:g}\t{null['differs']:.4f}\t{at_margin['differs']:.4f}\t"
                  f"{power['differs']:.4f}\t{null['same']:.4f}\t{cover:.4f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
