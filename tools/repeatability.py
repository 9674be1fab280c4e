"""Two runs of one config, answer row by answer row: both verdicts, and whether run B's point lies in
run A's interval. A row that says "differs" in one run and "same within" or "differs" the other way in
the other is a contradiction (the tool exits 1 on one). The share of B's points inside A's intervals is
printed beside what a correctly sized interval gives for an independent repeat at these rows' shapes
(a seeded simulation, figures.verdict_sim.repeat_coverage: about 83 % for large samples, more with few
processes, whose t intervals are wide).

Usage: python tools/repeatability.py RUN_A RUN_B   (results folders or committed references: each
holds figures.parquet and shots.parquet)
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from whichshot.figures.answer_figures import PHASES, cold_vs_warm  # noqa: E402
from whichshot.figures.comparison import interval_metrics  # noqa: E402
from whichshot.figures.table import read_figures  # noqa: E402
from whichshot.figures.verdict import DIFFERS, SAME, TOO_FEW, verdict_words  # noqa: E402
from whichshot.figures.verdict_sim import SPREADS, Shape, repeat_coverage  # noqa: E402
from whichshot.figures.workload_figures import SPEEDUP_METRIC  # noqa: E402

COMPARED = (*(cold_vs_warm(phase) for phase in PHASES), SPEEDUP_METRIC)
SPREAD = SPREADS[0]  # 2 % between processes, 1 % between shots: the expectation's noise


@dataclass(frozen=True)
class Row:
    """One comparison of a run: side over reference (a ratio, or ratio - 1 where less_one)."""

    point: float | None
    low: float | None
    high: float | None
    verdict: str
    less_one: bool
    shape: Shape | None  # None: too few processes for an interval

    def direction(self) -> int:
        null = 0.0 if self.less_one else 1.0
        return 0 if self.point is None else (1 if self.point > null else -1)

    def inside(self, point: float | None) -> bool | None:
        """Whether a point lies in this row's interval (None: no interval or no point)."""
        if self.low is None or point is None:
            return None
        return self.low <= point <= self.high

    def said(self) -> str:
        if self.point is None:
            return "not measured"
        scale, unit = (100, " %") if self.less_one else (1, "")
        interval = "" if self.low is None else f" [{self.low * scale:+.4g}, {self.high * scale:+.4g}]"
        return f"{self.point * scale:+.4g}{unit}{interval} {self.verdict}"


def answer_rows(run: Path) -> dict[str, Row]:
    """Every comparison of a run, by figure id."""
    figures = read_figures(run / "figures.parquet")
    value = {
        i: (None if pd.isna(v) else float(v))
        for i, v in zip(figures["figure_id"], figures["value"], strict=True)
    }
    columns = ["shot_id", "process_id", "protocol", "spec_mode"]
    shots = pd.read_parquet(run / "shots.parquet", columns=columns).set_index("shot_id")
    margin = float(figures.loc[figures["metric"] == "verdict_margin", "value"].iloc[0])
    rows = {}
    for point in figures[figures["metric"].isin(COMPARED)].to_dict("records"):
        head = point["figure_id"].removesuffix(point["metric"])
        low, high, verdict = (value.get(head + metric) for metric in interval_metrics(point["metric"]))
        parameters = json.loads(point["parameters"])
        rows[point["figure_id"]] = Row(value[point["figure_id"]], low, high, verdict_words(verdict, margin),
                                       parameters["less_one"], _shape(point, parameters, shots))  # fmt: skip
    return rows


def _shape(point: dict, parameters: dict, shots: pd.DataFrame) -> Shape | None:
    """Processes and shots per process on each side of a comparison (None: fewer than two a side)."""
    cited = shots.loc[list(point["shot_ids"])]
    sizes = []
    for which in ("side", "reference"):
        rows = cited[cited[parameters["side_axis"]] == parameters[which]]
        processes = rows["process_id"].nunique()
        sizes += [processes, max(1, round(len(rows) / max(1, processes)))]
    shape = Shape(*sizes)
    return shape if min(shape.side_processes, shape.reference_processes) >= 2 else None


def contradiction(a: Row, b: Row) -> str:
    said = {a.verdict, b.verdict}
    if DIFFERS in said and any(v.startswith(SAME) for v in said):
        return "differs in one, same in the other"
    if a.verdict == b.verdict == DIFFERS and a.direction() != b.direction():
        return "differs the other way"
    return ""


def main(run_a: str, run_b: str) -> int:
    a, b = answer_rows(Path(run_a)), answer_rows(Path(run_b))
    both = [row for row in a if row in b]
    print(f"{len(both)} answer rows in both runs (A {run_a}, B {run_b})")
    print("row\tA point [interval] verdict\tB point [interval] verdict\tB in A's interval\tcontradiction")
    covered, expected, contradictions = [], [], 0
    for row in both:
        inside = a[row].inside(b[row].point)
        if inside is not None:
            covered.append(inside)
            expected.append(repeat_coverage(a[row].shape, SPREAD, sims=4000, seed=53))
        clash = contradiction(a[row], b[row])
        contradictions += bool(clash)
        shown = {None: "—", True: "yes", False: "no"}[inside]
        print(f"{row}\t{a[row].said()}\t{b[row].said()}\t{shown}\t{clash or '-'}")
    if covered:
        share, expect = sum(covered) / len(covered), sum(expected) / len(expected)
        print(
            f"B's point inside A's interval: {sum(covered)} of {len(covered)} ({share:.0%}); expected for "
            f"an independent repeat at these shapes: {expect:.0%} (seeded simulation, {SPREAD.between:.0%} "
            f"spread between processes, {SPREAD.within:.0%} between shots; about 83 % for large samples)"
        )
    else:
        print(f"no row has an interval in run A ({TOO_FEW} everywhere): coverage not measurable")
    print(f"contradictions: {contradictions}")
    return 1 if contradictions else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
