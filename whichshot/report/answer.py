"""The answer block at the top of index.html and summary.md: per cold/warm pair its medians with
their spread, the delta and its noise verdict; per workload the best gated, lossless mode's
speed-up with its interval; one sentence on top. Where a row's figures rest on shots host_busy
names, a row beneath it gives the same figures without those shots (answer_figures.quiet), or says
there are too few quiet shots. Every number is a figures row (answer_figures), only written out
here, never computed."""

import json
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from whichshot.figures.answer_figures import (
    BEST_MODE,
    COLD_WARM_DELTA,
    HIGHEST,
    LOSSLESS_SHARE,
    LOWEST,
    MODES_PASSING,
    SPEED,
    TASK_SHARE,
    interval_metrics,
    quiet,
)
from whichshot.figures.crosscheck_figures import BENCH_TESTS
from whichshot.figures.noise import BEYOND_NOISE, METHOD, TOO_FEW, WITHIN_NOISE, verdict_words
from whichshot.figures.workload_figures import SPEEDUP_METRIC
from whichshot.report.format import NOT_MEASURED, format_lossless, format_number, md
from whichshot.report.tables import records_of, row_head
from whichshot.shots.axes import BASE_WORKLOAD, NO_DRAFT

BENCH_RATIO = BENCH_TESTS["tg"][2]
CELL_HEADER = ("cell", "cold median [min-max] (n)", "warm median [min-max] (n)", "delta",
               "within noise?", "vs llama-bench")  # fmt: skip
WORKLOAD_HEADER = ("workload", "none", "best mode", "speed-up [interval]", "task gate", "lossless",
                   "modes passing")  # fmt: skip
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
    busy_note: str = ""  # said only where some row has a row without host-busy shots
    cell_header: tuple[str, ...] = CELL_HEADER
    workload_header: tuple[str, ...] = WORKLOAD_HEADER


def answer_block(figures: pd.DataFrame) -> AnswerBlock:
    """The answer block's rows and sentence, from the figure table alone."""
    records = records_of(figures)
    by_key = {(r["cell_id"], r["metric"]): r for r in records if r["shot_index"] is None}
    pairs = [r for r in records if r["metric"] == COLD_WARM_DELTA]
    cells = [_cell_row(delta, by_key) for delta in pairs]
    workloads = [_workload_row(r, by_key) for r in records if r["metric"] == MODES_PASSING]
    busy = any(row["quiet"] for row in cells + workloads)
    return AnswerBlock(_sentence(cells), cells, workloads, busy_note=BUSY_NOTE if busy else "")


def _cell_row(delta: dict[str, Any], by_key: dict) -> dict[str, Any]:
    warm, cold = delta["cell_id"], delta["baseline_cell_id"]
    low, high, verdict = (by_key.get((warm, m)) for m in interval_metrics(COLD_WARM_DELTA))
    bench = [by_key.get((warm, m)) for m in (BENCH_RATIO, *interval_metrics(BENCH_RATIO)[:2])]
    used = [delta, low, high, verdict, *bench, *(by_key.get((c, m)) for c in (cold, warm)
                                                 for m in (SPEED, LOWEST, HIGHEST))]  # fmt: skip
    return {
        "label": short_label(delta),
        "cell_id": warm,
        "delta": _value(delta),
        "verdict": _verdict(verdict),
        "texts": [
            short_label(delta),
            _spread(by_key, cold),
            _spread(by_key, warm),
            f"{_percent(delta)} {_interval(low, high, _percent)}".strip(),
            _verdict(verdict),
            _bench(*bench),
        ],
        "ids": [f["figure_id"] for f in used if f is not None],
        "quiet": _quiet_cell_row(delta, by_key) if _busy(delta) else None,
    }


def _busy(figure: dict[str, Any] | None) -> bool:
    """The figure rests on a shot that host_busy names."""
    return figure is not None and HOST_BUSY in (figure["caveat_ids"] or ())


def _quiet_cell_row(delta: dict[str, Any], by_key: dict) -> dict[str, Any]:
    """The cold/warm row again without the host-busy shots."""
    warm, cold = delta["cell_id"], delta["baseline_cell_id"]
    quiet_delta = by_key.get((warm, quiet(COLD_WARM_DELTA)))
    low, high, verdict = (by_key.get((warm, m)) for m in interval_metrics(quiet(COLD_WARM_DELTA)))
    if quiet_delta is None:
        said, verdict_text = TOO_FEW_QUIET, "—"
    else:
        said, verdict_text = (
            f"{_percent(quiet_delta)} {_interval(low, high, _percent)}".strip(),
            _verdict(verdict),
        )
    used = [quiet_delta, low, high, verdict, *(by_key.get((c, quiet(m))) for c in (cold, warm)
                                               for m in (SPEED, LOWEST, HIGHEST))]  # fmt: skip
    return {
        "texts": [
            QUIET_LABEL,
            _quiet_spread(by_key, cold),
            _quiet_spread(by_key, warm),
            said,
            verdict_text,
            "—",
        ],
        "ids": [f["figure_id"] for f in used if f is not None],
    }


def _quiet_spread(by_key: dict, cell: str) -> str:
    """The side's spread without its busy shots; its own where it has none busy."""
    if (cell, quiet(SPEED)) in by_key:
        return _spread(by_key, cell, quiet)
    return TOO_FEW_QUIET if _busy(by_key.get((cell, SPEED))) else _spread(by_key, cell)


def _workload_row(counted: dict[str, Any], by_key: dict) -> dict[str, Any]:
    base = counted["cell_id"]
    best = next(
        (r for (_c, m), r in by_key.items() if m == BEST_MODE and r["baseline_cell_id"] == base), None
    )
    parts = [by_key.get((base, SPEED)), counted, best]
    texts, used = _best_texts(best, by_key, (SPEEDUP_METRIC,))
    total = _parameters(counted).get("modes")
    counts = f"{counted['value']:.0f} of {total}; {counted['note']}"
    return {
        "label": _workload_label(counted),
        "best_mode": texts[0],
        "texts": [_workload_label(counted), _speed(parts[0]), *texts, counts],
        "ids": [f["figure_id"] for f in parts + used if f is not None],
        "quiet": _quiet_workload_row(base, by_key) if _busy(best) else None,
    }


def _best_texts(
    best: dict[str, Any] | None, by_key: dict, speedups: tuple[str, ...]
) -> tuple[list[str], list]:
    """(mode, speed-up [interval] verdict, task gate, lossless) of a best-mode figure and the figures
    they come from; the interval is the first of `speedups` the mode's cell has one of."""
    if best is None:
        return ["no mode passed", "—", "—", "—"], []
    mode_cell = best["cell_id"]
    metric = next((m for m in speedups if (mode_cell, interval_metrics(m)[0]) in by_key), speedups[-1])
    low, high, verdict = (by_key.get((mode_cell, m)) for m in interval_metrics(metric))
    gate_share, lossless_share = by_key.get((mode_cell, TASK_SHARE)), by_key.get((mode_cell, LOSSLESS_SHARE))
    texts = [
        best["spec_mode"],
        f"{_times(best)} {_interval(low, high, _times)} {_verdict(verdict)}",
        f"passed ({_shots_passing(gate_share)})",
        format_lossless(lossless_share) if lossless_share else NOT_MEASURED,
    ]
    return texts, [low, high, verdict, gate_share, lossless_share]


def _quiet_workload_row(base: str, by_key: dict) -> dict[str, Any]:
    """The workload row again with the speed-ups without the host-busy shots."""
    best = next(
        (r for (_c, m), r in by_key.items() if m == quiet(BEST_MODE) and r["baseline_cell_id"] == base), None
    )
    none = by_key.get((base, quiet(SPEED))) or by_key.get((base, SPEED))
    none_text = TOO_FEW_QUIET if _busy(none) and none["metric"] == SPEED else _speed(none)
    if best is None:
        texts, used = [TOO_FEW_QUIET, "—", "—", "—"], []
    else:
        texts, used = _best_texts(best, by_key, (quiet(SPEEDUP_METRIC), SPEEDUP_METRIC))
    return {
        "texts": [QUIET_LABEL, none_text, *texts, best["note"] if best else "—"],
        "ids": [f["figure_id"] for f in [none, best, *used] if f is not None],
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


def _value(figure: dict[str, Any] | None) -> float | None:
    return None if figure is None else figure["value"]


def _speed(figure: dict[str, Any] | None) -> str:
    return NOT_MEASURED if _value(figure) is None else f"{format_number(figure['value'])} tok/s"


def _spread(by_key: dict, cell: str, metric=lambda m: m) -> str:
    """'51.0 [49.0-53.0] (8)': the median, the lowest and highest shot it uses, and how many."""
    median = by_key.get((cell, metric(SPEED)))
    if _value(median) is None:
        return NOT_MEASURED
    low, high = by_key.get((cell, metric(LOWEST))), by_key.get((cell, metric(HIGHEST)))
    spread = f" [{format_number(_value(low))}-{format_number(_value(high))}]" if low and high else ""
    return f"{format_number(median['value'])}{spread} ({len(median['shot_ids'])})"


def _percent(figure: dict[str, Any] | None) -> str:
    value = _value(figure)
    return NOT_MEASURED if value is None else f"{value * 100:+.1f} %"


def _times(figure: dict[str, Any] | None) -> str:
    value = _value(figure)
    return NOT_MEASURED if value is None else f"×{value:.2f}"


def _interval(low, high, write) -> str:
    if _value(low) is None or _value(high) is None:
        return ""
    return f"[{write(low)}, {write(high)}]"


def _verdict(figure: dict[str, Any] | None) -> str:
    return TOO_FEW if figure is None else verdict_words(figure["value"])


def _bench(ratio, low, high) -> str:
    if ratio is None:
        return "—"
    return f"{_times(ratio)} {_interval(low, high, _times)}".strip()


def _shots_passing(share: dict[str, Any]) -> str:
    n = len(share["shot_ids"])
    return f"{round(share['value'] * n)}/{n} shots"


def _parameters(figure: dict[str, Any]) -> dict[str, Any]:
    return json.loads(figure["parameters"] or "{}")


def _sentence(cells: list[dict[str, Any]]) -> str:
    """The page's answer in one sentence: is the first shot faster or slower, beyond or within noise."""
    told = [c for c in cells if c["delta"] is not None]
    if not told:
        return (
            "No cell has both a cold and a warm decode speed: this run cannot say whether the first shot "
            "is faster."
        )
    if len(told) == 1:
        c = told[0]
        direction = "faster" if c["delta"] > 0 else "slower"
        return (
            f"The first (cold) shot decodes {abs(c['delta']) * 100:.1f} % {direction} than the warm shots "
            f"here ({c['label']}): {c['verdict']}."
        )
    counts = {
        "slower beyond noise": sum(c["verdict"] == BEYOND_NOISE and c["delta"] < 0 for c in told),
        "faster beyond noise": sum(c["verdict"] == BEYOND_NOISE and c["delta"] > 0 for c in told),
        "within noise": sum(c["verdict"] == WITHIN_NOISE for c in told),
        TOO_FEW: sum(c["verdict"] == TOO_FEW for c in told),
    }
    said = ", ".join(f"{n} {words}" for words, n in counts.items() if n)
    return f"Of {len(told)} cold/warm pairs, the first (cold) shot decodes: {said}."


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
    return [*lines, *busy, f"Noise: {md(block.method)}.", ""]
