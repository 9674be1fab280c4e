"""The answer block at the top of index.html and summary.md: per warm cell, one verdict per quantity
(prefill, with TTFT beside it as a number; decode): each side's median and spread over processes,
the first shot over the warm shots and its verdict; per workload the best mode that no gate strikes,
its speed-up, interval and verdict; one sentence on top that says, per cell, what moved (phase,
direction, size with its interval) and, where the run cannot tell, the largest difference it rules
out. A row whose figure a table strikes (caveats.gates) says so and is left out of the sentence. Every
number is a figures row (answer_figures, workload_figures), only written out here, never computed."""

import json
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from whichshot.figures.answer_figures import (
    BESIDE,
    BEST_MODE,
    LOSSLESS_SHARE,
    MODES_PASSING,
    PHASES,
    TASK_SHARE,
    cold_vs_warm,
    first_shot,
    highest,
    lowest,
    steady,
)
from whichshot.figures.caveats.gates import gate_label, gate_words, struck_by
from whichshot.figures.comparison import interval_metrics, range_metrics
from whichshot.figures.constants import VERDICT_MARGIN
from whichshot.figures.crosscheck_figures import BENCH_TESTS
from whichshot.figures.steady_state import CLASSES
from whichshot.figures.steady_state import METHOD as STEADY_METHOD
from whichshot.figures.verdict import (
    DIFFERS,
    METHOD,
    PAIRED_METHOD,
    SAME,
    TOO_FEW,
    UNDECIDED,
    margin_words,
    resolution,
    verdict_words,
)
from whichshot.figures.workload_figures import SPEEDUP_METRIC
from whichshot.report.format import NOT_MEASURED, format_lossless, format_number, md
from whichshot.report.tables import records_of, row_head
from whichshot.shots.axes import AXES, BASE_WORKLOAD, NO_DRAFT

PHASE_WORDS = {"ttft_s": "TTFT", "prefill_tok_s": "prefill", "decode_tok_s": "decode"}
# A speed's relative delta > 0 in words.
FASTER, SLOWER = "faster", "slower"
BENCH_RATIO = {"prefill_tok_s": BENCH_TESTS["pp"][2], "decode_tok_s": BENCH_TESTS["tg"][2]}
CELL_HEADER = ("cell", "phase", "shot 1 median [min-max] (processes)",
               "warm median [min-max] (processes)", "shot 1 vs warm [95 % interval]", "verdict",
               "TTFT shot 1 vs warm", "vs llama-bench", "warm series: " + " / ".join(CLASSES))  # fmt: skip
WORKLOAD_HEADER = ("workload", "none", "best mode", "speed-up [95 % interval]", "verdict", "task gate",
                   "lossless", "modes passing")  # fmt: skip
STRUCK = "struck"
CANNOT_TELL = "this run cannot tell smaller ones"
BEYOND_WORDS = "no difference beyond"
BEYOND = f"'{BEYOND_WORDS} ±x %': the largest difference the interval leaves possible; {CANNOT_TELL}"


@dataclass
class AnswerBlock:
    sentence: str
    cells: list[dict[str, Any]] = field(default_factory=list)  # "texts" (one per header) and "ids"
    workloads: list[dict[str, Any]] = field(default_factory=list)
    method: str = METHOD
    margin: str = ""  # '±2 %'
    cell_header: tuple[str, ...] = CELL_HEADER
    workload_header: tuple[str, ...] = WORKLOAD_HEADER


@dataclass(frozen=True)
class Told:
    """One phase's comparison as the figure rows give it: the point, its interval ends, its verdict
    in words (or the gates that struck it)."""

    phase: str
    point: float | None
    low: float | None
    high: float | None
    words: str
    struck: str = ""  # the gates that struck its figures, in words ('' for none)


def answer_block(figures: pd.DataFrame) -> AnswerBlock:
    """The answer block's rows and sentence, from the figure table alone."""
    records = records_of(figures)
    by_key = {(r["cell_id"], r["metric"]): r for r in records if r["shot_index"] is None}
    margin = _margin(records)
    compared = {cold_vs_warm(phase) for phase in PHASES}
    warm_cells = list(dict.fromkeys(r["cell_id"] for r in records if r["metric"] in compared))
    rows = {warm: _pair_rows(warm, by_key, margin) for warm in warm_cells}
    cells = [row for made in rows.values() for row in made]
    workloads = [_workload_row(r, by_key, margin) for r in records if r["metric"] == MODES_PASSING]
    return AnswerBlock(_sentence(rows, margin), cells, workloads, method=_method(cells),
                       margin=margin_words(margin))  # fmt: skip


def _method(cells: list[dict[str, Any]]) -> str:
    """The methods the rows used: paired cold/warm, the unpaired one (speed-ups, separate cold
    processes), and the warm series' steady-state classes."""
    if not cells:
        return METHOD
    paired = f"shot 1 against warm: {PAIRED_METHOD}. " if any(row["paired"] for row in cells) else ""
    return f"{paired}Unpaired (speed-ups, separate cold processes): {METHOD}. Warm series: {STEADY_METHOD}"


def _margin(records: list[dict[str, Any]]) -> float:
    """The run's verdict margin (its constant figure; the config default for a table without one)."""
    return next((r["value"] for r in records if r["metric"] == "verdict_margin"), VERDICT_MARGIN)


def _pair_rows(warm: str, by_key: dict, margin: float) -> list[dict[str, Any]]:
    """One row per phase of a warm cell: shot 1 against the warm shots."""
    rows = []
    for phase in PHASES:
        delta = by_key.get((warm, cold_vs_warm(phase)))
        if delta is None:
            continue
        paired = bool(_parameters(delta).get("paired"))
        first = (warm, first_shot(phase)) if paired else (delta["baseline_cell_id"], phase)
        texts, used, told = _comparison_texts(by_key, warm, cold_vs_warm(phase), _percent, margin)
        beside = by_key.get((warm, cold_vs_warm(BESIDE[phase]))) if phase in BESIDE else None
        bench = [by_key.get((warm, m)) for m in _bench_metrics(phase)]
        sides = [by_key.get((c, m)) for c, p in (first, (warm, phase)) for m in (p, lowest(p), highest(p))]
        states = [by_key.get((warm, steady(phase, state))) for state in CLASSES]
        rows.append({
            "label": short_label(delta),
            "phase": phase,
            "cell_id": warm,
            "paired": paired,
            "delta": delta["value"],
            "verdict": texts[1],
            "told": told,
            "axes": {axis: delta.get(axis) for axis in AXES},
            "texts": [short_label(delta), PHASE_WORDS[phase], _spread(by_key, *first),
                      _spread(by_key, warm, phase), *texts, _beside(beside), _bench(*bench), _states(states)],
            "ids": _ids([*used, beside, *bench, *sides, *states]),
        })  # fmt: skip
    return rows


def _beside(figure: dict[str, Any] | None) -> str:
    """The number shown beside a verdict (TTFT beside prefill), struck as its tables strike it."""
    if figure is None:
        return "—"
    gates = struck_by(figure)
    return f"{STRUCK} ({gate_label(gates)})" if gates else _percent(figure)


def _states(counts: list[dict[str, Any] | None]) -> str:
    """'1 / 0 / 0 / 5': the warm series in each steady-state class (figures.steady_state)."""
    if any(_value(c) is None for c in counts):
        return "—"
    return " / ".join(f"{c['value']:.0f}" for c in counts)


def _bench_metrics(phase: str) -> tuple[str, ...]:
    if phase not in BENCH_RATIO:
        return ()
    return (BENCH_RATIO[phase], *interval_metrics(BENCH_RATIO[phase])[:2])


def _comparison_texts(by_key: dict, cell: str, metric: str, write, margin: float):
    """('point [interval]' or 'point (range a to b)', the verdict in words), the figures they come
    from, and the comparison as Told; where a table strikes any of them, the gates in place of both."""
    point = by_key.get((cell, metric))
    low, high, verdict = (by_key.get((cell, m)) for m in interval_metrics(metric))
    range_low, range_high = (by_key.get((cell, m)) for m in range_metrics(metric))
    used = [point, low, high, verdict, range_low, range_high]
    phase = point["columns"][0] if point is not None and len(point["columns"]) else ""
    gates = [gate for f in used for gate in struck_by(f)]
    if gates:
        gates = list(dict.fromkeys(gates))
        told = Told(phase, None, None, None, STRUCK, gate_words(gates))
        return [f"{STRUCK} ({gate_label(gates)})", gate_words(gates)], used, told
    if _value(low) is not None and _value(high) is not None:
        said = f"{write(point)} [{write(low)}, {write(high)}]"
    elif _value(range_low) is not None and _value(range_high) is not None:
        said = f"{write(point)} (processes span {write(range_low)} to {write(range_high)})"
    else:
        said = write(point)
    words = verdict_words(None if verdict is None else verdict["value"], margin)
    told = Told(phase, _value(point), _value(low), _value(high), words)
    return [said, words], used, told


def _workload_row(counted: dict[str, Any], by_key: dict, margin: float) -> dict[str, Any]:
    base = counted["cell_id"]
    best = _best_of(by_key, base, BEST_MODE)
    none = by_key.get((base, PHASES[-1]))
    texts, used = _best_texts(best, by_key, margin)
    total = _parameters(counted).get("modes")
    counts = f"{counted['value']:.0f} of {total}; {counted['note']}"
    return {
        "label": _workload_label(counted),
        "best_mode": texts[0],
        "best_figure_id": best["figure_id"] if best else None,
        "texts": [_workload_label(counted), _speed(none), *texts, counts],
        "ids": _ids([none, counted, best, *used]),
    }


def _best_of(by_key: dict, base: str, metric: str) -> dict[str, Any] | None:
    return next((r for (_c, m), r in by_key.items() if m == metric and r["baseline_cell_id"] == base), None)


def _best_texts(best: dict[str, Any] | None, by_key: dict, margin: float):
    """(mode, speed-up [interval], verdict, task gate, lossless) of a best-mode figure and the figures
    they come from."""
    if best is None:
        return ["no mode passed", "—", "—", "—", "—"], []
    mode_cell = best["cell_id"]
    texts, used, _told = _comparison_texts(by_key, mode_cell, SPEEDUP_METRIC, _times, margin)
    gate_share, lossless_share = by_key.get((mode_cell, TASK_SHARE)), by_key.get((mode_cell, LOSSLESS_SHARE))
    gate = f"passed ({_shots_passing(gate_share)})" if gate_share else NOT_MEASURED
    lossless = format_lossless(lossless_share) if lossless_share else NOT_MEASURED
    return [best["spec_mode"], *texts, gate, lossless], [*used, gate_share, lossless_share]


def short_label(r: dict[str, Any]) -> str:
    """'eng · m · p64 · rest 5 s': the axes a reader tells cells apart by (the cell id on hover)."""
    head = row_head(r)
    words = [head["engine_on"], r["model"]]
    words += [f"p{r['prompt_tokens_requested']}"] if r["prompt_tokens_requested"] else []
    words += [r["workload"]] if r["workload"] not in (None, BASE_WORKLOAD) else []
    words += [r["spec_mode"]] if r["spec_mode"] not in (None, NO_DRAFT) else []
    words += [f"rest {r['rest_s']:g} s"] if r["rest_s"] else []
    words += [head["series"]] if head["series"] else []
    return " · ".join(str(w) for w in words)


def _workload_label(r: dict[str, Any]) -> str:
    words = [row_head(r)["engine_on"], r["model"], r["workload"], r["text_kind"], r["protocol"]]
    return " · ".join(str(w) for w in words if w)


def _ids(figures: list) -> list[str]:
    return [f["figure_id"] for f in figures if f is not None]


def _value(figure: dict[str, Any] | None) -> float | None:
    return None if figure is None else figure["value"]


def _speed(figure: dict[str, Any] | None) -> str:
    return NOT_MEASURED if _value(figure) is None else f"{format_number(figure['value'])} tok/s"


def _spread(by_key: dict, cell: str, phase: str, metric=lambda m: m) -> str:
    """'51.0 [49.0-53.0] (3)': the median, the lowest and highest process, and how many processes."""
    median = by_key.get((cell, metric(phase)))
    if _value(median) is None:
        return NOT_MEASURED
    low, high = by_key.get((cell, metric(lowest(phase)))), by_key.get((cell, metric(highest(phase))))
    spread = f" [{format_number(_value(low))}-{format_number(_value(high))}]" if low and high else ""
    processes = _processes(low) if low else "?"
    return f"{format_number(median['value'])}{spread} ({processes})"


def _processes(figure: dict[str, Any]) -> str:
    """How many processes a side's spread rests on ('?' where the figure does not say)."""
    return str(_parameters(figure).get("processes", "?"))


def _percent(figure: dict[str, Any] | None) -> str:
    value = _value(figure)
    return NOT_MEASURED if value is None else f"{value * 100:+.1f} %"


def _times(figure: dict[str, Any] | None) -> str:
    value = _value(figure)
    return NOT_MEASURED if value is None else f"×{value:.2f}"


def _bench(ratio=None, low=None, high=None) -> str:
    if ratio is None:
        return "—"
    interval = (
        f" [{_times(low)}, {_times(high)}]" if _value(low) is not None and _value(high) is not None else ""
    )
    return f"{_times(ratio)}{interval}"


def _shots_passing(share: dict[str, Any]) -> str:
    n = len(share["shot_ids"])
    return f"{round(share['value'] * n)}/{n} shots"


def _parameters(figure: dict[str, Any]) -> dict[str, Any]:
    return json.loads(figure["parameters"] or "{}")


def _sentence(rows: dict[str, list[dict[str, Any]]], margin: float) -> str:
    """The page's answer: per cell (named by the axes its label does not share with the others), what
    moved (phase, direction, size with its interval) and, where the run cannot tell, the largest
    difference it leaves possible."""
    if not rows:
        return (
            "No cell has both a cold and a warm shot: this run cannot say whether the first shot is faster."
        )
    made = [cells for cells in rows.values() if cells]
    names = _distinct_names([cells[0]["axes"] for cells in made])
    said = []
    for name, cells in zip(names, made, strict=True):
        told = "; ".join(_told_words(row["told"], margin) for row in cells)
        said.append(f"{name}: {told}" if name else told)
    sentence = "The first (cold) shot against the warm shots — " + ". ".join(said) + "."
    return sentence + f" ({BEYOND})" if BEYOND_WORDS in sentence else sentence


def _distinct_names(axes_of: list[dict[str, Any]]) -> list[str]:
    """Each cell named by the axes in which the cells differ ('p256', 'llama_cpp · rest 5 s'; '' for
    a single cell)."""
    differ = [a for a in AXES if len({str(axes.get(a)) for axes in axes_of}) > 1]
    return [" · ".join(_axis_words(a, axes.get(a)) for a in differ) for axes in axes_of]


def _axis_words(axis: str, value: Any) -> str:
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    words = {"prompt_tokens_requested": f"p{shown}", "context_tokens_requested": f"ctx {shown}",
             "rest_s": f"rest {shown} s", "precondition_s": f"precondition {shown} s"}  # fmt: skip
    named = ("engine", "model", "workload", "spec_mode")  # their values say what they are
    return words.get(axis, shown if axis in named else f"{axis} {shown}")


def _told_words(told: Told, margin: float) -> str:
    """'prefill 53.0 % slower [50.0 %, 57.0 %]', 'decode: no difference beyond ±3.0 %', 'decode the same
    within ±2 % [-1.0 %, +1.5 %]', 'prefill: struck (...)'."""
    name = PHASE_WORDS[told.phase]
    if told.words == STRUCK:
        return f"{name}: {STRUCK} ({told.struck})"
    if told.low is None or told.high is None or told.point is None:
        return f"{name}: {TOO_FEW}"
    if told.words == DIFFERS:
        sizes = sorted((abs(told.low), abs(told.high)))
        direction = FASTER if told.point > 0 else SLOWER
        return f"{name} {_size(told.point)} {direction} [{_size(sizes[0])}, {_size(sizes[1])}]"
    if told.words.startswith(SAME):
        return f"{name} the same within {margin_words(margin)} [{_signed(told.low)}, {_signed(told.high)}]"
    assert told.words == UNDECIDED, told
    return f"{name}: {BEYOND_WORDS} ±{_size(resolution(told.low, told.high))}"


def _size(delta: float) -> str:
    return f"{abs(delta) * 100:.1f} %"


def _signed(delta: float) -> str:
    return f"{delta * 100:+.1f} %"


def answer_markdown(block: AnswerBlock) -> list[str]:
    """The block as Markdown lines (summary.md's top)."""

    def table(header, rows) -> list[str]:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return lines + ["| " + " | ".join(md(t) for t in r["texts"]) + " |" for r in rows]

    lines = ["## Answer", "", md(block.sentence), ""]
    if block.cells:
        lines += [*table(block.cell_header, block.cells), ""]
    if block.workloads:
        lines += [*table(block.workload_header, block.workloads), ""]
    return [*lines, f"Verdicts (margin {md(block.margin)}): {md(block.method)}.", ""]
