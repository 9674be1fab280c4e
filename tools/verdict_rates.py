"""Print the verdict's error rates and power at the shapes the shipped configs use (the numbers behind
tests/test_verdict_error_rates.py and docs/report.md): per shape and spread, how often it says
"differs" with no difference, with one as large as the margin, and with a true effect (10 % for cold
against warm, x1.5 for a drafting speed-up), and for the unpaired shapes how often a repeat's point
falls inside a run's interval. The spreads: the stated ones (verdict_sim.SPREADS) and those measured
on the project's 2-core VM (tests/fixtures/noise/cpu_2core.json, tools/noise_fixture.py); last, the
default's power at that noise as its series per cell grow.

Usage: python tools/verdict_rates.py [--sims N]
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from whichshot.config import config_as_run  # noqa: E402
from whichshot.figures.verdict_sim import (  # noqa: E402
    SPREADS,
    PairedShape,
    config_shapes,
    fixture_spreads,
    paired_config_shapes,
    paired_rates,
    repeat_coverage,
    sequential_rates,
    verdict_rates,
)

MARGIN = 0.02  # the default verdict_margin
COLD_WARM, SPEEDUP = -0.10, 0.5


def _shapes(configs: list[Path], of) -> list:
    return sorted({shape for path in configs for shape in of(config_as_run(path))})


def unpaired_table(configs: list[Path], sims: int) -> None:
    fixture = fixture_spreads()["speedup"]
    print(f"unpaired (speed-ups; separate cold processes): margin ±{MARGIN:.0%}, {sims} draws each")
    print("shape\tspread\tdiffers@0\tdiffers@margin\tdiffers@-10%\tdiffers@x1.5\tsame@0\trepeat_cover")
    for shape in _shapes(configs, config_shapes):
        size = (f"{shape.side_processes}x{shape.side_shots} vs "
                f"{shape.reference_processes}x{shape.reference_shots}")  # fmt: skip
        for spread in (*SPREADS, fixture):
            null = verdict_rates(shape, spread, 0.0, MARGIN, sims, seed=41)
            at_margin = verdict_rates(shape, spread, MARGIN, MARGIN, sims, seed=41)
            power = verdict_rates(shape, spread, COLD_WARM, MARGIN, sims, seed=47)
            speedup = verdict_rates(shape, spread, SPEEDUP, MARGIN, sims, seed=47)
            cover = repeat_coverage(shape, spread, sims, seed=53)
            name = "measured" if spread is fixture else f"{spread.between:g}/{spread.within:g}"
            print(f"{size}\t{name}\t{null['differs']:.4f}\t{at_margin['differs']:.4f}\t{power['differs']:.4f}\t"
                  f"{speedup['differs']:.4f}\t{null['same']:.4f}\t{cover:.4f}")  # fmt: skip


def paired_table(configs: list[Path], sims: int) -> None:
    measured = fixture_spreads()["paired"]
    print(f"\npaired (shot 1 against its own warm shots): margin ±{MARGIN:.0%}, {sims} draws each")
    print(
        "processes x warm shots\tspread (first/within/tails)\tdiffers@0\tdiffers@margin\tdiffers@-10%\tsame@0"
    )
    for shape in _shapes(configs, paired_config_shapes):
        for phase, spreads in measured.items():
            for spread in spreads:
                null = paired_rates(shape, spread, 0.0, MARGIN, sims, seed=41)
                at_margin = paired_rates(shape, spread, MARGIN, MARGIN, sims, seed=41)
                power = paired_rates(shape, spread, COLD_WARM, MARGIN, sims, seed=47)
                name = f"{phase} {spread.first:g}/{spread.within:g}/{spread.tails_df or '-'}"
                print(f"{shape.processes}x{shape.warm_shots}\t{name}\t{null['differs']:.4f}\t"
                      f"{at_margin['differs']:.4f}\t{power['differs']:.4f}\t{null['same']:.4f}")  # fmt: skip


def default_power(sims: int) -> None:
    (shape,) = paired_config_shapes(config_as_run(ROOT / "config" / "config.yaml"))
    print(f"\nthe default's power for a 10 % cold/warm difference at the measured noise (normal tails), "
          f"by series a cell (the default runs {shape.processes})")  # fmt: skip
    counts = (3, 5, 8, 10, 12, 16, 20, 24, 32, 40)
    print("phase\t" + "\t".join(str(n) for n in counts))
    measured = fixture_spreads()
    rows = [(phase, spreads[0]) for phase, spreads in measured["paired"].items()]
    rows += [(f"{phase} (classical sd)", spread) for phase, spread in measured["paired_classical"].items()]
    for name, spread in rows:
        powers = [paired_rates(PairedShape(n, shape.warm_shots), spread, COLD_WARM, MARGIN, sims, seed=47)
                  for n in counts]  # fmt: skip
        print(name + "\t" + "\t".join(f"{p['differs']:.2f}" for p in powers))


# Candidate looks of run until decided (protocol.until_decided) and the default's fixed 10 series.
CANDIDATE_LOOKS = ((10,), (10, 20, 40), (10, 30), (12, 24, 36), (10, 25, 40), (10, 20, 40, 60), (16, 32, 48))


def sequential_table(sims: int) -> None:
    """Run until decided at the measured noise: false "differs" (no difference; one as large as the
    margin) over all looks, power for a 10 % difference in each phase, and the series a cell used."""
    (shape,) = paired_config_shapes(config_as_run(ROOT / "config" / "config.yaml"))
    measured = fixture_spreads()["paired"]
    print(f"\nrun until decided (Bonferroni over the looks), the default's {shape.warm_shots} kept warm "
          f"shots, ±{MARGIN:.0%}, {sims} draws: a cell stops once prefill and decode decide")  # fmt: skip
    print("looks\ttails\tdiffers@0 (prefill/decode)\tdiffers@margin\tpower@-10% (prefill/decode)\t"
          "series used@0\tseries used@-10%")  # fmt: skip
    for looks in CANDIDATE_LOOKS:
        for tails in (0, 1):
            spreads = {phase: measured[phase][tails] for phase in measured}
            rates = [
                sequential_rates(
                    looks, shape.warm_shots, spreads, dict.fromkeys(spreads, effect), MARGIN, sims, seed
                )  # fmt: skip
                for effect, seed in ((0.0, 41), (MARGIN, 41), (COLD_WARM, 47))
            ]
            null, at_margin, power = ({phase: r.differs for phase, r in rate.items()} for rate in rates)
            used = [next(iter(rate.values())).mean_series for rate in (rates[0], rates[2])]
            print(f"{list(looks)}\t{'t3' if tails else 'normal'}\t{_pair(null)}\t{_pair(at_margin)}\t"
                  f"{_pair(power)}\t{used[0]:.1f}\t{used[1]:.1f}")  # fmt: skip


def _pair(rates: dict[str, float]) -> str:
    return "/".join(f"{rates[phase]:.4f}" for phase in ("prefill_tok_s", "decode_tok_s"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=10_000)
    sims = parser.parse_args(argv).sims
    configs = sorted((ROOT / "config").glob("*.yaml"))
    unpaired_table(configs, sims)
    paired_table(configs, sims)
    default_power(sims)
    sequential_table(sims)
    return 0


if __name__ == "__main__":
    sys.exit(main())
