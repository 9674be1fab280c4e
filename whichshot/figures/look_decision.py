"""The decision after a look of run until decided (measure.looks): every paired cold/warm verdict of a
cell (figures.verdict, prefill and decode) from its finished series, at the looks' level, and what
follows.

Error rate (Bonferroni over the planned looks): every look's interval is at level 1 - alpha / K for
K planned looks (alpha = 1 - verdict.LEVEL), so the chance that any look's interval misses the truth
is at most alpha, whatever look the cell stops at; the report's paired verdicts of the grid use the
same level (verdict_level). figures.verdict_sim.sequential_rates draws the whole design.
"""

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from whichshot.figures.statistic import ColdRule, WarmRule
from whichshot.figures.verdict import (
    DIFFERS_CODE,
    LEVEL,
    MIN_PROCESSES,
    SAME_CODE,
    paired_log_interval,
    paired_values,
    verdict_codes,
    verdict_words,
)
from whichshot.measure.busy import kept
from whichshot.measure.looks import CONTINUE, Looks, looks_of
from whichshot.tables import read_jsonl

PHASES = ("prefill_tok_s", "decode_tok_s")
DECIDED, LAST_LOOK, SECONDS_CAP = "decided", "last look", "seconds cap"
DECIDING_CODES = (DIFFERS_CODE, SAME_CODE)


def look_level(looks: int, level: float = LEVEL) -> float:
    """The interval level of each of `looks` planned looks: 1 - (1 - level) / looks."""
    return 1.0 - (1.0 - level) / looks


def verdict_level(protocol: dict[str, Any]) -> float:
    """The level of the protocol grid's paired verdicts: the looks' where until_decided is on."""
    looks = looks_of(protocol)
    return LEVEL if looks is None else look_level(len(looks.counts))


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
    """The seconds a cell's series measured: per engine process, its start-up (process_ready_s) and its
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
    codes = [v["code"] for series in verdicts.values() for v in series.values()]
    if codes and all(code in DECIDING_CODES for code in codes):
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
    series label's paired verdicts at the looks' level, the cell's measured seconds, what follows."""
    records = read_jsonl(shot_files)
    level = look_level(len(looks.counts))
    shots = pd.DataFrame(kept(records))
    warm = shots[shots["protocol"] == "warm"] if len(shots) else shots
    verdicts = {
        str(label): {phase: paired_verdict(rows, phase, warm_fraction, margin, level) for phase in PHASES}
        for label, rows in (warm.groupby("series_label", sort=True) if len(warm) else ())
    }
    seconds = measured_seconds(records)
    return {"look": look, "series": looks.counts[look - 1], "looks": list(looks.counts), "level": level,
            "seconds": seconds, "max_seconds": looks.max_seconds, "verdicts": verdicts,
            "decision": decision(verdicts, look, looks, seconds)}  # fmt: skip
