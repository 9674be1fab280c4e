"""Measure the noise the verdicts face on this VM from committed CPU runs of the default config, and
write it as a fixture (tests/fixtures/noise/cpu_2core.json) for the seeded simulation
(figures.verdict_sim, tests/test_verdict_error_rates.py).

What it measures, in log speed (a spread of 0.05 is about 5 %):
- paired: per warm series (one engine process), d = log(shot 1) - log(median of its warm shots
  2..n); the spread of d between the processes of one cell (prefill and decode), from the runs
  with at least two warm series a cell;
- warm_shot: the spread between the warm shots (2..n) of one series, from every run given;
- speedup_between: the spread between the processes of one workload cell (a process's value: the
  median of the shots the warm rule keeps), no-draft and drafted cells apart, from the runs with at
  least two series a workload cell.
Each spread is estimated robustly, from the differences of every two values of one group (a cell or
a series): sd = median |x_i - x_j| / (sqrt(2) * 0.6745), which one wild value moves little; the
classical pooled sd is beside it, and the tails (the largest difference and the share of
differences beyond three robust sd) say how far from normal the noise is. Every shot is counted,
busy or not: the noise as a run meets it.

Usage: python tools/noise_fixture.py [RUN ...] [--out FILE]
(default: results/reference/cpu_default_pair and its repeat/ (the paired default from fresh clones),
cpu_first_run, its repeat/, and the earlier default runs cpu_default,
cpu_cost_model and cpu_protocol_bench)
"""

import argparse
import itertools
import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from whichshot.figures.statistic import WarmRule  # noqa: E402

REFERENCE = ROOT / "results" / "reference"
DEFAULT_RUNS = (
    "cpu_default_pair",
    "cpu_default_pair/repeat",
    "cpu_first_run",
    "cpu_first_run/repeat",
    "cpu_default",
    "cpu_cost_model",
    "cpu_protocol_bench",
)
OUT = ROOT / "tests" / "fixtures" / "noise" / "cpu_2core.json"
PHASES = ("prefill_tok_s", "decode_tok_s")
MAD_TO_SD = 0.6745
BASE_WORKLOAD = "continue_text"  # the protocol grid's workload (shots.axes.BASE_WORKLOAD)


def spread(groups: Iterable[np.ndarray]) -> dict[str, float | int]:
    """Robust and classical spread of values within groups (each group: values that share a truth)."""
    groups = [g for g in groups if len(g) >= 2]
    differences = np.array([a - b for g in groups for a, b in itertools.combinations(g, 2)])
    squares = sum(float(((g - g.mean()) ** 2).sum()) for g in groups)
    df = sum(len(g) - 1 for g in groups)
    if not df:
        return {"groups": 0, "df": 0}
    robust = float(np.median(np.abs(differences)) / (math.sqrt(2) * MAD_TO_SD))
    largest = float(np.abs(differences).max() / math.sqrt(2))
    return {
        "sd_robust": round(robust, 5),
        "sd_classical": round(math.sqrt(squares / df), 5),
        "groups": len(groups),
        "df": df,
        "largest_over_robust": round(largest / robust, 2) if robust else None,
        "share_beyond_3_robust_sd": round(float(np.mean(np.abs(differences) / math.sqrt(2) > 3 * robust)), 3),
    }


def _warm_series(shots: pd.DataFrame) -> Iterable[tuple[tuple, pd.DataFrame]]:
    """(cell key, one series' ok shots of one process, in shot order) of the protocol grid's warm cells."""
    warm = shots[(shots["protocol"] == "warm") & (shots["status"] == "ok")]
    warm = warm[warm["workload"] == BASE_WORKLOAD]
    for (job, _process), series in warm.groupby(["job_id", "process_id"], sort=True):
        key = (series["model"].iloc[0], series["prompt_tokens_requested"].iloc[0], job.rsplit(".rep", 1)[0])
        yield key, series.sort_values("shot_index")


def paired_groups(shots: pd.DataFrame, phase: str) -> list[np.ndarray]:
    """Per warm cell, each process's d = log(shot 1) - log(median of its shots 2..n)."""
    by_cell: dict[tuple, list[float]] = {}
    for key, series in _warm_series(shots):
        first = series[series["shot_index"] == 1][phase].dropna()
        rest = series[series["shot_index"] > 1][phase].dropna()
        if len(first) and len(rest) and first.iloc[0] > 0:
            by_cell.setdefault(key, []).append(math.log(first.iloc[0]) - math.log(rest.median()))
    return [np.array(v) for v in by_cell.values()]


def warm_shot_groups(shots: pd.DataFrame, phase: str) -> list[np.ndarray]:
    """Per warm series, the log speeds of its shots 2..n."""
    return [np.log(s[s["shot_index"] > 1][phase].dropna().to_numpy()) for _key, s in _warm_series(shots)]


def speedup_groups(shots: pd.DataFrame, warm_fraction: float, drafted: bool) -> list[np.ndarray]:
    """Per workload cell (no-draft or drafted), each process's log decode speed (the median of the
    shots the warm rule keeps, never shot 1)."""
    keep = WarmRule(warm_fraction).keep
    rows = shots[
        (shots["protocol"] == "warm") & (shots["status"] == "ok") & (shots["workload"] != BASE_WORKLOAD)
    ]
    rows = rows[(rows["spec_mode"] != "none") if drafted else (rows["spec_mode"] == "none")]
    by_cell: dict[tuple, list[float]] = {}
    for (job, _process), series in rows.groupby(["job_id", "process_id"], sort=True):
        series = series.sort_values("shot_index")
        kept = series.iloc[len(series) - keep(len(series)) :]
        kept = kept[kept["shot_index"] > 1]["decode_tok_s"].dropna()
        if len(kept):
            by_cell.setdefault(job.rsplit(".rep", 1)[0], []).append(math.log(kept.median()))
    return [np.array(v) for v in by_cell.values()]


def measure(runs: list[Path]) -> dict:
    shots = {run: pd.read_parquet(run / "shots.parquet") for run in runs}
    names = {run: str(run.relative_to(ROOT)) if run.is_relative_to(ROOT) else str(run) for run in runs}
    paired = {}
    for phase in PHASES:
        groups = {run: paired_groups(s, phase) for run, s in shots.items()}
        paired[phase] = {
            **spread(g for gs in groups.values() for g in gs),
            "per_run": {names[run]: spread(gs) for run, gs in groups.items() if any(len(g) >= 2 for g in gs)},
        }
    warm_shot = {
        phase: spread(g for s in shots.values() for g in warm_shot_groups(s, phase)) for phase in PHASES
    }
    between = {}
    for drafted, name in ((False, "none"), (True, "drafted")):
        groups = {run: speedup_groups(s, 0.7, drafted) for run, s in shots.items()}
        between[name] = {
            **spread(g for gs in groups.values() for g in gs),
            "per_run": {names[run]: spread(gs) for run, gs in groups.items() if any(len(g) >= 2 for g in gs)},
        }
    return {
        "source_runs": [names[run] for run in runs],
        "units": "standard deviations of natural-log speed (0.05 is about 5 %)",
        "method": __doc__.split("\n\n")[1].strip(),
        "paired": paired,
        "warm_shot": warm_shot,
        "speedup_between": between,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, default=[REFERENCE / r for r in DEFAULT_RUNS])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    measured = measure([run.resolve() for run in args.runs])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(measured, indent=1) + "\n")
    print(json.dumps({k: measured[k] for k in ("paired", "warm_shot", "speedup_between")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
