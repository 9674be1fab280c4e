"""Run until decided (protocol.until_decided): a protocol-grid cell gets more warm series in planned
looks until each of its verdicts decides.

The looks are the cell's series counts, e.g. [10, 20, 40]. After each look a Snakemake checkpoint
(decide_look, workflow/rules/looks.smk) reads the cell's finished series, computes each paired
verdict (figures.verdict: shot 1 against the kept warm shots, per process) for prefill and decode
with the look's interval, and writes a decision: "decided" (every verdict "differs" or "same
within"), "continue" (the next look's series are then planned), "last look" or "seconds cap" (the
cell's measured seconds reached max_seconds). The series of look k+1 are in the DAG only once look
k's decision says "continue"; a resumed run reads the decisions already on disk.

Error rate (Bonferroni over the planned looks): every look's interval is at level 1 - alpha / K for
K planned looks (alpha = 1 - verdict.LEVEL), so the chance that any look's interval misses the truth
is at most alpha, whatever look the cell stops at; the report's verdicts use the same level
(verdict_level). figures.verdict_sim.sequential_rates draws the whole design.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from whichshot.figures.statistic import ColdRule, WarmRule
from whichshot.figures.verdict import LEVEL, paired_log_interval, paired_values, verdict_codes
from whichshot.figures.verdict import DIFFERS_CODE, MIN_PROCESSES, SAME_CODE, verdict_words
from whichshot.measure.busy import kept

PHASES = ("prefill_tok_s", "decode_tok_s")
DECIDED, CONTINUE, LAST_LOOK, SECONDS_CAP = "decided", "continue", "last look", "seconds cap"
DECIDING_CODES = (DIFFERS_CODE, SAME_CODE)


@dataclass(frozen=True)
class Looks:
    """The planned looks (series counts, increasing) and the cap on a cell's measured seconds."""

    counts: tuple[int, ...]
    max_seconds: float | None = None

    @property
    def level(self) -> float:
        """Each look's interval level: Bonferroni over the planned looks."""
        return look_level(len(self.counts))

    def bounds(self, look: int) -> tuple[int, int]:
        """The repeats (1-based, inclusive) that look `look` (1-based) adds."""
        return (self.counts[look - 2] + 1 if look > 1 else 1), self.counts[look - 1]


def look_level(looks: int, level: float = LEVEL) -> float:
    """The interval level of each of `looks` planned looks: 1 - (1 - level) / looks."""
    return 1.0 - (1.0 - level) / looks


def looks_of(protocol: dict[str, Any]) -> Looks | None:
    """The protocol's planned looks; None where until_decided is off (the fixed repeats run)."""
    until = protocol.get("until_decided") or {}
    if not until.get("enabled"):
        return None
    return Looks(tuple(until["looks"]), until.get("max_seconds"))


def verdict_level(protocol: dict[str, Any]) -> float:
    """The level of the protocol grid's verdict intervals: the looks' where until_decided is on."""
    looks = looks_of(protocol)
    return LEVEL if looks is None else looks.level


def paired_verdict(
    rows: pd.DataFrame, phase: str, warm_fraction: float, margin: float, level: float
) -> dict[str, Any]:
    """One series label's paired verdict in one phase, as the report computes it: shot 1 of each process
    (ColdRule) against the median of its kept warm shots (WarmRule), at `level`."""
    firsts = ColdRule().select(rows, phase).rows
    warms = WarmRule(warm_fraction).select(rows, phase).rows
    first, warm = paired_values(pd.concat([firsts, warms]), phase)
    if len(first) < MIN_PROCESSES or min(*first, *warm) <= 0:
        return {"processes": len(first), "code": None, "verdict": verdict_words(None, margin)}
    _mean, low, high = paired_log_interval(np.log(first) - np.log(warm), level)
    low_delta, high_delta = float(np.expm1(low)), float(np.expm1(high))
    code = float(verdict_codes(np.array(low_delta), np.array(high_delta), margin))
    return {"processes": len(first), "low": low_delta, "high": high_delta, "code": code,
            "verdict": verdict_words(code, margin)}  # fmt: skip


def measured_seconds(records: list[dict[str, Any]]) -> float:
    """The seconds a cell's series measured: per engine process, start-up (process_ready_s) and its
    first request to its last shot's end (replaced processes too: their time was spent)."""
    spans: dict[str, list[float]] = {}
    for record in records:
        span = spans.setdefault(record["process_id"], [np.inf, -np.inf, 0.0])
        span[0] = min(span[0], record["t_request_mono_s"])
        span[1] = max(span[1], record["t_end_mono_s"])
        span[2] = max(span[2], record.get("process_ready_s") or 0.0)
    return float(sum(end - start + ready for start, end, ready in spans.values() if end >= start))


def decision(verdicts: dict[str, dict[str, Any]], look: int, looks: Looks, seconds: float) -> str:
    """What follows look `look` (1-based): DECIDED where every verdict decides, else LAST_LOOK after the
    last look, SECONDS_CAP where the cell measured max_seconds, else CONTINUE."""
    if all(v["code"] in DECIDING_CODES for series in verdicts.values() for v in series.values()):
        return DECIDED
    if look >= len(looks.counts):
        return LAST_LOOK
    if looks.max_seconds is not None and seconds >= looks.max_seconds:
        return SECONDS_CAP
    return CONTINUE


def decide_look(
    shot_files: list[Path], look: int, looks: Looks, warm_fraction: float, margin: float
) -> dict[str, Any]:
    """The decision after look `look` from the cell's finished series (their shots files): every warm
    series label's paired verdicts at the look's level, the cell's seconds, what follows."""
    records = [json.loads(line) for path in shot_files for line in Path(path).read_text().splitlines() if line]
    seconds = measured_seconds(records)
    shots = pd.DataFrame(kept(records))
    verdicts = {}
    warm = shots[shots["protocol"] == "warm"] if len(shots) else shots
    for label, rows in warm.groupby("series_label", sort=True) if len(warm) else ():
        verdicts[label] = {
            phase: paired_verdict(rows, phase, warm_fraction, margin, looks.level) for phase in PHASES
        }
    return {"look": look, "series": looks.counts[look - 1], "looks": list(looks.counts),
            "level": looks.level, "seconds": seconds, "max_seconds": looks.max_seconds,
            "verdicts": verdicts, "decision": decision(verdicts, look, looks, seconds)}  # fmt: skip
