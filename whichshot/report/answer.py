"""The answer block at the top of index.html and summary.md: per cold/warm pair, each phase (TTFT,
prefill, decode) with each side's median and spread over processes, cold over warm and its verdict;
per workload the best mode that no gate strikes, its speed-up, interval and verdict; one sentence on
top that names the phase with the largest difference that leaves the margin. Where a row's figures
rest on shots host_busy names, a row beneath it gives the same figures without those shots, or says
there are too few quiet shots. Every number is a figures row (answer_figures, workload_figures),
only written out here, never computed."""

import json
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from whichshot.figures.answer_figures import (
    BEST_MODE,
    LOSSLESS_SHARE,
    MODES_PASSING,
    PHASES,
    TASK_SHARE,
    cold_vs_warm,
    highest,
    lowest,
    quiet,
)
from whichshot.figures.comparison import interval_metrics, range_metrics
from whichshot.figures.constants import VERDICT_MARGIN
from whichshot.figures.crosscheck_figures import BENCH_TESTS
from whichshot.figures.verdict import DIFFERS, METHOD, SAME, TOO_FEW, UNDECIDED, margin_words, verdict_words
from whichshot.figures.workload_figures import SPEEDUP_METRIC
from whichshot.report.format import NOT_MEASURED, format_lossless, format_number, md
from whichshot.report.tables import records_of, row_head
from whichshot.shots.axes import BASE_WORKLOAD, NO_DRAFT

PHASE_WORDS = {"ttft_s": "TTFT", "prefill_tok_s": "prefill", "decode_tok_s": "decode"}
# A phase's delta > 0 in words: a longer TTFT, a faster speed.
DIRECTION = {"ttft_s": ("longer", "shorter"), "prefill_tok_s": ("faster", "slower"),
             "decode_tok_s": ("faster", "slower")}  # fmt: skip
BENCH_RATIO = {"prefill_tok_s": BENCH_TESTS["pp"][2], "decode_tok_s": BENCH_TESTS["tg"][2]}
CELL_HEADER = ("cell", "phase", "cold median [min-max] (processes)", "warm median [min-max] (processes)",
               "cold vs warm [95 % interval]", "verdict", "vs llama-bench")  # fmt: skip
WORKLOAD_HEADER = ("workload", "none", "best mode", "speed-up [95 % interval]", "verdict", "task gate",
                   "lossless", "modes passing")  # fmt: skip
HOST_BUSY = "host_busy"  # the caveat (caveats.run_rules.host_busy) whose shots a quiet row leaves out
QUIET_LABEL = "↳ without host-busy shots"
TOO_FEW_QUIET = "too few quiet shots"
BUSY_NOTE = (
    f"Rows '{QUIET_LABEL}' give the row above again from its shots less those the host_busy caveat names "
    "(other work ran on the machine during them); a side without its own busy shot keeps its figures; "
    f"'{TOO_FEW_QUIET}': leaving them out leaves a side no shot."
)


@dataclass
class AnswerBlock:
    sentence: str
    cells: list[dict[str, Any]] = field(default_factory=list)  # "texts" (one per header) and "ids"
    workloads: list[dict[str, Any]] = field(default_factory=list)
    method: str = METHOD
    margin: str = ""  # '±2 %'
    busy_note: str = ""  # said only where some row has a row without host-busy shots
    cell_header: tuple[str, ...] = CELL_HEADER
    workload_header: tuple[str, ...] = WORKLOAD_HEADER


def answer_block(figures: pd.DataFrame) -> AnswerBlock:
    """The answer block's rows and sentence, from the figure table alone."""
    records = records_of(figures)
    by_key = {(r["cell_id"], r["metric"]): r for r in records if r["shot_index"] is None}
    margin = _margin(records)
    pairs = [r for r in records if r["metric"] == cold_vs_warm(PHASES[-1])]
    cells = [row for delta in pairs for row in _pair_rows(delta, by_key, margin)]
    workloads = [_workload_row(r, by_key, margin) for r in records if r["metric"] == MODES_PASSING]
    busy = any(row["quiet"] for row in cells + workloads)
    return AnswerBlock(_sentence(pairs, by_key, margin), cells, workloads, margin=margin_words(margin),
                       busy_note=BUSY_NOTE if busy else "")  # fmt: skip


def _margin(records: list[dict[str, Any]]) -> float:
    """The run's verdict margin (its constant figure; the config default for a table without one)."""
    return next((r["value"] for r in records if r["metric"] == "verdict_margin"), VERDICT_MARGIN)


def _pair_rows(decode_delta: dict[str, Any], by_key: dict, margin: float) -> list[dict[str, Any]]:
    """One row per phase of a cold/warm pair, each with its row without host-busy shots."""
    warm, cold = decode_delta["cell_id"], decode_delta["baseline_cell_id"]
    rows = []
    for phase in PHASES:
        delta = by_key.get((warm, cold_vs_warm(phase)))
        if delta is None:
            continue
        texts, used = _comparison_texts(by_key, warm, cold_vs_warm(phase), _percent, margin)
        bench = [by_key.get((warm, m)) for m in _bench_metrics(phase)]
        sides = [by_key.get((c, m)) for c in (cold, warm) for m in (phase, lowest(phase), highest(phase))]
        rows.append({
            "label": short_label(delta),
            "phase": phase,
            "cell_id": warm,
            "delta": delta["value"],
            "verdict": texts[1],
            "texts": [short_label(delta), PHASE_WORDS[phase], _spread(by_key, cold, phase),
                      _spread(by_key, warm, phase), *texts, _bench(*bench)],
            "ids": _ids([*used, *bench, *sides]),
            "quiet": _quiet_pair_row(by_key, warm, cold, phase, margin)
            if _busy(delta) else None,
        })  # fmt: skip
    return rows


def _bench_metrics(phase: str) -> tuple[str, ...]:
    if phase not in BENCH_RATIO:
        return ()
    return (BENCH_RATIO[phase], *interval_metrics(BENCH_RATIO[phase])[:2])


def _comparison_texts(by_key: dict, cell: str, metric: str, write, margin: float) -> tuple[list[str], list]:
    """('point [interval]' or 'point (range a to b)', the verdict in words) of a comparison, and the
    figures they come from."""
    point = by_key.get((cell, metric))
    low, high, verdict = (by_key.get((cell, m)) for m in interval_metrics(metric))
    range_low, range_high = (by_key.get((cell, m)) for m in range_metrics(metric))
    if _value(low) is not None and _value(high) is not None:
        said = f"{write(point)} [{write(low)}, {write(high)}]"
    elif _value(range_low) is not None and _value(range_high) is not None:
        said = f"{write(point)} (processes span {write(range_low)} to {write(range_high)})"
    else:
        said = write(point)
    words = verdict_words(None if verdict is None else verdict["value"], margin)
    return [said, words], [point, low, high, verdict, range_low, range_high]


def _busy(figure: dict[str, Any] | None) -> bool:
    """The figure rests on a shot that host_busy names."""
    return figure is not None and HOST_BUSY in (figure["caveat_ids"] or ())


def _quiet_pair_row(by_key: dict, warm: str, cold: str, phase: str, margin: float) -> dict[str, Any]:
    """A phase's cold/warm row again without the host-busy shots."""
    metric = quiet(cold_vs_warm(phase))
    if (warm, metric) in by_key:
        texts, used = _comparison_texts(by_key, warm, metric, _percent, margin)
    else:
        texts, used = [TOO_FEW_QUIET, "—"], []
    sides = [by_key.get((c, quiet(m))) for c in (cold, warm) for m in (phase, lowest(phase), highest(phase))]
    return {
        "texts": [QUIET_LABEL, PHASE_WORDS[phase], _quiet_spread(by_key, cold, phase),
                  _quiet_spread(by_key, warm, phase), *texts, "—"],
        "ids": _ids([*used, *sides]),
    }  # fmt: skip


def _quiet_spread(by_key: dict, cell: str, phase: str) -> str:
    """The side's spread without its busy shots; its own where it has none busy."""
    if (cell, quiet(phase)) in by_key:
        return _spread(by_key, cell, phase, quiet)
    return TOO_FEW_QUIET if _busy(by_key.get((cell, phase))) else _spread(by_key, cell, phase)


def _workload_row(counted: dict[str, Any], by_key: dict, margin: float) -> dict[str, Any]:
    base = counted["cell_id"]
    best = _best_of(by_key, base, BEST_MODE)
    none = by_key.get((base, PHASES[-1]))
    texts, used = _best_texts(best, by_key, (SPEEDUP_METRIC,), margin)
    total = _parameters(counted).get("modes")
    counts = f"{counted['value']:.0f} of {total}; {counted['note']}"
    return {
        "label": _workload_label(counted),
        "best_mode": texts[0],
        "best_figure_id": best["figure_id"] if best else None,
        "texts": [_workload_label(counted), _speed(none), *texts, counts],
        "ids": _ids([none, counted, best, *used]),
        "quiet": _quiet_workload_row(base, by_key, margin) if _busy(best) else None,
    }


def _best_of(by_key: dict, base: str, metric: str) -> dict[str, Any] | None:
    return next((r for (_c, m), r in by_key.items() if m == metric and r["baseline_cell_id"] == base), None)


def _best_texts(best: dict[str, Any] | None, by_key: dict, speedups: tuple[str, ...], margin: float):
    """(mode, speed-up [interval], verdict, task gate, lossless) of a best-mode figure and the figures
    they come from; the interval is the first of `speedups` the mode's cell has one of."""
    if best is None:
        return ["no mode passed", "—", "—", "—", "—"], []
    mode_cell = best["cell_id"]
    metric = next((m for m in speedups if (mode_cell, m) in by_key), speedups[-1])
    texts, used = _comparison_texts(by_key, mode_cell, metric, _times, margin)
    gate_share, lossless_share = by_key.get((mode_cell, TASK_SHARE)), by_key.get((mode_cell, LOSSLESS_SHARE))
    gate = f"passed ({_shots_passing(gate_share)})" if gate_share else NOT_MEASURED
    lossless = format_lossless(lossless_share) if lossless_share else NOT_MEASURED
    return [best["spec_mode"], *texts, gate, lossless], [*used, gate_share, lossless_share]


def _quiet_workload_row(base: str, by_key: dict, margin: float) -> dict[str, Any]:
    """The workload row again with the speed-ups without the host-busy shots."""
    best = _best_of(by_key, base, quiet(BEST_MODE))
    none = by_key.get((base, quiet(PHASES[-1]))) or by_key.get((base, PHASES[-1]))
    none_text = TOO_FEW_QUIET if _busy(none) and none["metric"] == PHASES[-1] else _speed(none)
    if best is None:
        texts, used = [TOO_FEW_QUIET, "—", "—", "—", "—"], []
    else:
        texts, used = _best_texts(best, by_key, (quiet(SPEEDUP_METRIC), SPEEDUP_METRIC), margin)
    return {
        "texts": [QUIET_LABEL, none_text, *texts, best["note"] if best else "—"],
        "ids": _ids([none, best, *used]),
    }


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


def _sentence(pairs: list[dict[str, Any]], by_key: dict, margin: float) -> str:
    """The page's answer in one sentence: which phase of the first shot moved, and by how much."""
    if not pairs:
        return (
            "No cell has both a cold and a warm shot: this run cannot say whether the first shot is faster."
        )
    told = [_phase_verdicts(pair, by_key, margin) for pair in pairs]
    if len(told) == 1:
        return f"Here {_pair_words(told[0], margin)}."
    per_phase = []
    for phase in PHASES:
        verdicts = [t[phase] for t in told if phase in t]
        counts = {
            words: sum(v[0] == words for v in verdicts) for words in (DIFFERS, SAME, UNDECIDED, TOO_FEW)
        }
        said = ", ".join(f"{n} {_plural_verdict(words, n, margin)}" for words, n in counts.items() if n)
        per_phase.append(f"{PHASE_WORDS[phase]}: {said}")
    said = "; ".join(per_phase)
    return f"Of {len(told)} cold/warm pairs, the first (cold) shot against the warm shots: {said}."


def _phase_verdicts(pair: dict[str, Any], by_key: dict, margin: float) -> dict[str, tuple[str, float | None]]:
    """phase -> (its verdict's first words, its delta) for one cold/warm pair."""
    warm = pair["cell_id"]
    found = {}
    for phase in PHASES:
        delta, verdict = (
            by_key.get((warm, cold_vs_warm(phase))),
            by_key.get((warm, f"{cold_vs_warm(phase)}_verdict")),
        )
        if delta is not None:
            words = verdict_words(None if verdict is None else verdict["value"], margin)
            found[phase] = (SAME if words.startswith(SAME) else words, delta["value"])
    return found


def _pair_words(verdicts: dict[str, tuple[str, float | None]], margin: float) -> str:
    """'the first (cold) shot's prefill is 14.6 % slower than the warm shots'; decode is the same
    within ±2 %; TTFT undecided'."""
    moved = [(phase, d) for phase, (words, d) in verdicts.items() if words == DIFFERS and d is not None]
    rest = [phase for phase in verdicts if phase not in dict(moved)]
    if moved:
        phase, delta = max(moved, key=lambda item: abs(math.log1p(item[1])))
        moved_by = _moved_words(phase, delta)
        head = f"the first (cold) shot's {PHASE_WORDS[phase]} is {moved_by} than the warm shots'"
        rest += [p for p, _d in moved if p != phase]
    else:
        head = "the first (cold) shot differs from the warm shots in no phase beyond the noise"
    others = [_other_words(phase, *verdicts[phase], margin) for phase in PHASES if phase in rest]
    return "; ".join([head, *others])


def _moved_words(phase: str, delta: float) -> str:
    faster, slower = DIRECTION[phase]
    return f"{abs(delta) * 100:.1f} % {faster if delta > 0 else slower}"


def _other_words(phase: str, words: str, delta: float | None, margin: float) -> str:
    name = PHASE_WORDS[phase]
    if words == SAME:
        return f"{name} is the same within {margin_words(margin)}"
    if words == DIFFERS and delta is not None:
        return f"{name} is {_moved_words(phase, delta)}"
    return f"{name}: {words}"


def _plural_verdict(words: str, n: int, margin: float) -> str:
    if words == SAME:
        return f"the same within {margin_words(margin)}"
    if words == TOO_FEW:
        return f"with {words}"
    return "differ" if words == DIFFERS and n > 1 else words


def answer_markdown(block: AnswerBlock) -> list[str]:
    """The block as Markdown lines (summary.md's top)."""

    def table(header, rows) -> list[str]:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        shown = [t for r in rows for t in (r["texts"], r["quiet"] and r["quiet"]["texts"]) if t]
        return lines + ["| " + " | ".join(md(t) for t in texts) + " |" for texts in shown]

    lines = ["## Answer", "", md(block.sentence), ""]
    if block.cells:
        lines += [*table(block.cell_header, block.cells), ""]
    if block.workloads:
        lines += [*table(block.workload_header, block.workloads), ""]
    busy = [md(block.busy_note), ""] if block.busy_note else []
    return [*lines, *busy, f"Verdicts (margin {md(block.margin)}): {md(block.method)}.", ""]
