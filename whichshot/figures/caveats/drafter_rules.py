"""Caveats about what a drafter carries from one request to the next: n-gram state persists across
the requests of one process (DESIGN.md), so a warm shot's drafter has seen the earlier ones."""

import pandas as pd

from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import cell_id, group_cells
from whichshot.figures.constants import DRAFTER_WARM_ACCEPTANCE_MARGIN
from whichshot.figures.statistic import ok_rows
from whichshot.figures.workload_figures import ACCEPTANCE_COUNTS
from whichshot.shots.axes import AXES, NO_DRAFT, SERIES_SHAPE
from whichshot.shots.caveat import Finding

# What a drafter's acceptance moves: decode speed, the drafting counts, the decode's energy.
DRAFT_DEPENDENT = frozenset({
    "decode_tok_s", "engine_decode_tok_s", "e2e_s", "decode_span_s", "engine_decode_ms",
    "stream_decode_tok_s_mean", "stream_decode_tok_s_min", "aggregate_decode_tok_s", "aggregate_output_tok_s",
    "engine_draft_tokens", "engine_draft_accepted", "engine_draft_mean_len",
    "server_spec_draft_tokens_delta", "server_spec_accepted_tokens_delta", "server_spec_drafts_delta",
    "decode_gpu_energy_j", "energy_j_per_token",
})  # fmt: skip


def drafter_learnt_across_requests(catalog: Catalog) -> Finding | None:
    """Drafted warm cells whose shots after a process's first request (drafter_requests_seen > 0)
    accept more than DRAFTER_WARM_ACCEPTANCE_MARGIN above the first requests of the same cell's
    processes, cold or warm (drafter_requests_seen == 0)."""
    shots = ok_rows(catalog.shots, "drafter_requests_seen")
    drafted = shots[shots["spec_mode"] != NO_DRAFT]
    found = []  # (warm cell, its shots after a first request, warm acceptance, cold acceptance)
    for _group, rows in group_cells(drafted, tuple(a for a in AXES if a not in SERIES_SHAPE)):
        first_requests = rows[rows["drafter_requests_seen"] == 0]
        for cell, warm in group_cells(rows[rows["protocol"] == "warm"]):
            later = warm[warm["drafter_requests_seen"] > 0]
            rates = _acceptances(later, first_requests)
            if rates is not None and rates[0] - rates[1] > DRAFTER_WARM_ACCEPTANCE_MARGIN:
                found.append((cell, later, *rates))
    if not found:
        return None
    cell, _later, warm_rate, cold_rate = max(found, key=lambda f: f[2] - f[3])
    return Finding(
        "drafter_learnt_across_requests",
        f"In {len(found)} drafted warm cell(s) the drafter accepted more of its drafts once it had served "
        "earlier requests of its process than on a process's first request, by more than "
        f"drafter_warm_acceptance_margin ({DRAFTER_WARM_ACCEPTANCE_MARGIN:.0%} points; most in "
        f"{cell_id(cell)}: {warm_rate:.1%} warm against {cold_rate:.1%} on first requests). Its state "
        "carries across requests (n-gram): the warm speed-up is that of a drafter that learnt from earlier "
        "requests in the process, not the first request's (the cold figures are).",
        frozenset(s for _c, later, _w, _f in found for s in later["shot_id"]),
        columns=DRAFT_DEPENDENT,
    )


def _acceptances(warm: pd.DataFrame, first_requests: pd.DataFrame) -> tuple[float, float] | None:
    """(warm, first requests') accepted / drafted, from the first counts both sets drafted with."""
    for accepted, drafted in ACCEPTANCE_COUNTS:
        warm_rate, cold_rate = _rate(warm, accepted, drafted), _rate(first_requests, accepted, drafted)
        if warm_rate is not None and cold_rate is not None:
            return warm_rate, cold_rate
    return None


def _rate(rows: pd.DataFrame, accepted: str, drafted: str) -> float | None:
    """Summed accepted over summed drafted tokens; None where nothing was drafted."""
    drafted_tokens = rows[drafted].fillna(0).sum()
    return float(rows[accepted].fillna(0).sum() / drafted_tokens) if drafted_tokens > 0 else None


DRAFTER_RULES = (drafter_learnt_across_requests,)
