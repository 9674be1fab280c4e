"""Two runs side by side (another machine, another build): each headline figure's ratio B/A, matched
by cell, beside the measured factors that may explain it, each with its own B/A ratio, and the one
factor the rule below names.

The rule (ATTRIBUTION, also printed above the table):
- a drafted speed-up (speedup_vs_none): acceptance that differs by ACCEPTANCE_ALIKE or more is the
  factor; where it differs less and both runs predicted the speed-up (predicted_speedup_vs_none,
  from the verify cost), the verify cost is the factor when the predicted ratio B/A is within
  EXPLAINS_WITHIN of the measured one;
- decode (prefill): the memory bandwidth (compute) ratio closest to the figure's, when within
  EXPLAINS_WITHIN of it;
- else nothing measured explains it. Host load is flagged wherever either run's median other work
  over the figure's shots is above their busy threshold (figures.constants.busy_threshold_cores).
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from whichshot.figures.caveats.run_rules import busy_limits
from whichshot.figures.cells import cell_id, cell_of
from whichshot.figures.table import read_figures
from whichshot.figures.workload_figures import SPEEDUP_METRIC
from whichshot.shots.axes import AXES, BASE_WORKLOAD, NO_DRAFT
from whichshot.shots.upgrade import read_shots

DECODE, PREFILL = "decode_tok_s", "prefill_tok_s"
ACCEPTANCE_ALIKE = 0.05  # relative difference of acceptance below which the drafts did alike
EXPLAINS_WITHIN = 0.20  # a factor's ratio within this of the figure's explains it
# Machine factors: the first metric both runs measured (a GPU run's own before the CPU's).
BANDWIDTH = ("gpu_copy_bandwidth_bytes_s", "cpu_copy_bandwidth_bytes_s")
COMPUTE = ("gpu_gemm_flop_s", "cpu_gemm_flop_s")
ENGINE_COMPUTE_SUFFIX = "_engine_matmul_flop_s"  # the engine's own kernels at the model's type
# Cell factors: figures of the headline figure's cell.
CELL_FACTORS = {
    "acceptance": "acceptance_rate",
    "accepted_per_step": "server_accepted_per_step",
    "verify_cost": "verify_cost_ratio",
    "predicted_speedup": "predicted_speedup_vs_none",
}
FACTORS = ("bandwidth", "compute", "engine_compute", "host_load", *CELL_FACTORS)
WORDS = {"bandwidth": "memory bandwidth", "compute": "compute", "engine_compute": "engine-kernel compute",
         "host_load": "host load", "acceptance": "acceptance", "accepted_per_step": "accepted/step",
         "verify_cost": "verify cost", "predicted_speedup": "predicted speed-up"}  # fmt: skip
ATTRIBUTION = (
    f"speedup_vs_none: acceptance differing by {ACCEPTANCE_ALIKE:.0%} or more is the factor; else the verify "
    f"cost, where the predicted speed-up's ratio B/A is within {EXPLAINS_WITHIN:.0%} of the measured one. "
    f"{DECODE} ({PREFILL}): the memory bandwidth (compute) ratio closest to the figure's, within "
    f"{EXPLAINS_WITHIN:.0%}. Else unexplained. Host load is flagged where either run's median other work "
    "over the figure's shots is above their host_busy threshold."
)


@dataclass(frozen=True)
class Run:
    """What a comparison reads of a run: its figures and shots tables."""

    name: str
    figures: pd.DataFrame
    shots: pd.DataFrame


@dataclass(frozen=True)
class Factor:
    """One measured factor in both runs (None: not measured there)."""

    metric: str
    a: float | None
    b: float | None
    unlike: bool = False  # both measured it, by different methods: no ratio

    @property
    def ratio(self) -> float:
        if self.a is None or self.b is None or self.a == 0 or self.unlike:
            return math.nan
        return self.b / self.a

    def missing(self) -> str | None:
        """'A', 'B', 'A and B' where not measured, else None."""
        sides = [side for side, value in (("A", self.a), ("B", self.b)) if value is None]
        return " and ".join(sides) or None

    def gap(self) -> str | None:
        """Why there is no ratio, in words (None: there is one)."""
        if self.missing():
            return f"not measured in {self.missing()}"
        return f"{self.metric} measured by different methods in A and B" if self.unlike else None


def load_run(path: Path) -> Run:
    """A results dir or a committed reference dir holding figures.parquet and shots.parquet."""
    path = Path(path)
    return Run(str(path), read_figures(path / "figures.parquet"), read_shots(path / "shots.parquet"))


def compare_runs(a: Run, b: Run) -> pd.DataFrame:
    """One row per headline figure both runs hold for the same cell: A, B, B/A, each factor's B/A
    (NaN where not measured; `not_measured` says in which run), the factor named and why."""
    heads_a, heads_b = _headlines(a.figures), _headlines(b.figures)
    both = heads_a.merge(heads_b, on=["metric", "cell"], suffixes=("_a", "_b"))
    machine = _machine_factors(a.figures, b.figures)
    cells_a, cells_b = _cell_figures(a.figures), _cell_figures(b.figures)
    rows = [_row(r, machine, cells_a, cells_b, a.shots, b.shots) for r in both.to_dict("records")]
    return pd.DataFrame(rows, columns=_COLUMNS)


_COLUMNS = ["figure", "cell", "a", "b", "ratio", *FACTORS, "host_load_a", "host_load_b", "host_busy",
            "not_measured", "factor", "why"]  # fmt: skip


def _row(head: dict, machine: dict[str, Factor], cells_a, cells_b, shots_a, shots_b) -> dict[str, Any]:
    cell = head["cell"]
    factors = dict(machine)
    for name, metric in CELL_FACTORS.items():
        factors[name] = Factor(metric, cells_a.get((metric, cell)), cells_b.get((metric, cell)))
    load_a, limit_a = _host_load(shots_a, head["shot_ids_a"])
    load_b, limit_b = _host_load(shots_b, head["shot_ids_b"])
    factors["host_load"] = Factor("host_foreign_cores", load_a, load_b)
    ratio = head["value_b"] / head["value_a"]
    factor, why = attribute(head["metric"], ratio, factors)
    sides = (("A", load_a, limit_a), ("B", load_b, limit_b))
    busy = [f"{side} {load:.2f} > {limit:.2f}" for side, load, limit in sides if (load or 0.0) > limit]
    if busy:
        why += f"; host load flagged: median other work over the threshold in {', '.join(busy)} cores"
    return {
        "figure": head["metric"],
        "cell": cell,
        "a": head["value_a"],
        "b": head["value_b"],
        "ratio": ratio,
        **{name: factors[name].ratio for name in FACTORS},
        "host_load_a": load_a,
        "host_load_b": load_b,
        "host_busy": bool(busy),
        "not_measured": {n: factors[n].gap() for n in FACTORS if factors[n].gap()},
        "factor": factor,
        "why": why,
    }


def attribute(metric: str, ratio: float, factors: dict[str, Factor]) -> tuple[str, str]:
    """The factor the rule names for a figure's ratio B/A, and why (ATTRIBUTION)."""
    if metric == SPEEDUP_METRIC:
        return _speedup_factor(ratio, factors)
    names = ("bandwidth",) if metric == DECODE else ("compute", "engine_compute")
    measured = [n for n in names if not math.isnan(factors[n].ratio)]
    if not measured:
        return "unexplained", "; ".join(f"{WORDS[n]} {factors[n].gap()}" for n in names)
    closest = min(measured, key=lambda n: abs(math.log(factors[n].ratio / ratio)))
    words = f"{WORDS[closest]} ({factors[closest].metric}) x{factors[closest].ratio:.2f}"
    if _explains(factors[closest].ratio, ratio):
        return WORDS[closest], f"{words} is the closest ratio to x{ratio:.2f}, within {EXPLAINS_WITHIN:.0%}"
    return "unexplained", f"closest {words} is not within {EXPLAINS_WITHIN:.0%} of x{ratio:.2f}"


def _speedup_factor(ratio: float, factors: dict[str, Factor]) -> tuple[str, str]:
    acceptance, predicted = factors["acceptance"], factors["predicted_speedup"]
    if math.isnan(acceptance.ratio):
        return "unexplained", f"acceptance {acceptance.gap()}"
    if abs(acceptance.ratio - 1) >= ACCEPTANCE_ALIKE:
        return "acceptance", f"acceptance x{acceptance.ratio:.2f} differs by {ACCEPTANCE_ALIKE:.0%} or more"
    alike = f"acceptance alike (x{acceptance.ratio:.2f})"
    if math.isnan(predicted.ratio):
        return "unexplained", f"{alike}; verify cost {predicted.gap()}"
    words = f"predicted speed-up x{predicted.ratio:.2f} (verify cost x{factors['verify_cost'].ratio:.2f})"
    if _explains(predicted.ratio, ratio):
        return WORDS["verify_cost"], f"{alike}; {words} explains x{ratio:.2f} within {EXPLAINS_WITHIN:.0%}"
    return "unexplained", f"{alike}; {words} is not within {EXPLAINS_WITHIN:.0%} of x{ratio:.2f}"


def _explains(factor_ratio: float, ratio: float) -> bool:
    return abs(factor_ratio / ratio - 1) <= EXPLAINS_WITHIN


def _cell_key(row: dict[str, Any]) -> str:
    """The cell by its axis values (not the stored id, whose form older runs wrote differently)."""
    return cell_id(cell_of({axis: row.get(axis) for axis in AXES}))


def _cell_rows(figures: pd.DataFrame) -> pd.DataFrame:
    """Cell figures (not one shot's), each with its cell key."""
    rows = figures[figures["shot_index"].isna() & (figures["cell_id"].fillna("") != "")].copy()
    rows["cell"] = [_cell_key(r) for r in rows.to_dict("records")]
    return rows


def _headlines(figures: pd.DataFrame) -> pd.DataFrame:
    """The answer block's figures: decode and prefill of the protocol grid's cells, the speed-up of
    each drafted workload cell."""
    rows = _cell_rows(figures)
    grid = (rows["workload"] == BASE_WORKLOAD) & rows["metric"].isin([DECODE, PREFILL])
    drafted = (rows["metric"] == SPEEDUP_METRIC) & (rows["spec_mode"] != NO_DRAFT)
    return rows[(grid | drafted) & rows["value"].notna()][["metric", "cell", "value", "shot_ids"]]


def _cell_figures(figures: pd.DataFrame) -> dict[tuple[str, str], float]:
    rows = _cell_rows(figures)
    rows = rows[rows["metric"].isin(CELL_FACTORS.values()) & rows["value"].notna()]
    return {(m, c): float(v) for m, c, v in zip(rows["metric"], rows["cell"], rows["value"], strict=True)}


def _machine_factors(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, Factor]:
    (values_a, methods_a), (values_b, methods_b) = _machine_values(a), _machine_values(b)
    unlike = {m for m in methods_a.keys() & methods_b.keys() if methods_a[m] != methods_b[m]}
    engine = sorted(m for m in {*values_a, *values_b} if m.endswith(ENGINE_COMPUTE_SUFFIX))
    choices = {
        "bandwidth": BANDWIDTH,
        "compute": COMPUTE,
        "engine_compute": engine or ("cpu" + ENGINE_COMPUTE_SUFFIX,),
    }
    return {name: _pick(metrics, values_a, values_b, unlike) for name, metrics in choices.items()}


def _machine_values(figures: pd.DataFrame) -> tuple[dict[str, float], dict[str, str]]:
    """Measured figures of the machine (no cell): the probes' bandwidth and compute, and each one's
    method (its formula: a one-thread copy and an all-threads copy are not one measurement)."""
    rows = figures[(figures["cell_id"].fillna("") == "") & (figures["kind"] != "assumed")]
    rows = rows[rows["value"].notna()]
    values = dict(zip(rows["metric"], rows["value"].astype(float), strict=True))
    return values, dict(zip(rows["metric"], rows["formula"].fillna(""), strict=True))


def _pick(metrics: Iterable[str], a: dict[str, float], b: dict[str, float], unlike: set[str]) -> Factor:
    """The first metric both runs measured alike, else one both measured unlike, else the first
    either did (to say where it is missing)."""
    metrics = list(metrics)
    both = [m for m in metrics if m in a and m in b]
    chosen = next((m for m in both if m not in unlike), None)
    if chosen is None and both:
        return Factor(both[0], a[both[0]], b[both[0]], unlike=True)
    chosen = chosen or next((m for m in metrics if m in a or m in b), metrics[0])
    return Factor(chosen, a.get(chosen), b.get(chosen))


def _host_load(shots: pd.DataFrame, shot_ids: Iterable[str]) -> tuple[float | None, float]:
    """Median other work over the figure's ok shots and the median of their busy thresholds."""
    rows = shots[shots["shot_id"].isin(list(shot_ids)) & (shots["status"] == "ok")]
    rows = rows[rows["host_foreign_cores"].notna()]
    if rows.empty:
        return None, math.inf
    return float(rows["host_foreign_cores"].median()), float(busy_limits(rows).median())


def render(table: pd.DataFrame, a_name: str, b_name: str) -> str:
    """The comparison as Markdown: the rule, then one row per headline figure."""
    header, rows = table_cells(table)
    lines = [
        f"# compare: B / A\n\nA: `{a_name}`  \nB: `{b_name}`\n",
        f"Rule: {ATTRIBUTION}\n",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join([*cells[:1], f"`{cells[1]}`", *cells[2:]]) + " |" for cells in rows]
    if table.empty:
        lines.append(f"\n{NO_COMMON_CELL}")
    return "\n".join(lines) + "\n"


NO_COMMON_CELL = "No headline figure of one run has a cell of the other's."


def table_cells(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The comparison's header and rows as text, for Markdown and the HTML report alike."""
    header = ["figure", "cell", "A", "B", "B/A", *(WORDS[f] for f in FACTORS), "factor", "why"]
    rows = []
    for row in table.to_dict("records"):
        cells = [row["figure"], row["cell"], f"{row['a']:.4g}", f"{row['b']:.4g}", f"x{row['ratio']:.3f}"]
        cells += [_factor_words(row, name) for name in FACTORS]
        rows.append([*cells, row["factor"], row["why"]])
    return header, rows


def _factor_words(row: dict[str, Any], name: str) -> str:
    gap = row["not_measured"].get(name)
    if gap:
        return gap
    if name == "host_load":
        ratio = "" if math.isnan(row[name]) else f"x{row[name]:.2f} "
        return f"{ratio}({row['host_load_a']:.2f} / {row['host_load_b']:.2f} cores)"
    return f"x{row[name]:.3f}"
