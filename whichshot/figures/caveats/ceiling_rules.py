"""A speed above its physical ceiling is a defect of the ceiling (a peak measured too low, a cost per
token counted too high), never a result: it is flagged, not published silently. The one exemption is
decode with speculative drafting, which verifies several tokens per weight read and may legitimately
pass the bandwidth ceiling of one token per read."""

import pandas as pd

from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import cell_id, group_cells
from whichshot.figures.figure import Figure
from whichshot.shots.axes import NO_DRAFT
from whichshot.shots.caveat import Finding

SHARE_SUFFIX = "_share_of_ceiling"
# The phases a share is of, and the speed column each reads (a figure reading it gets the caveat).
SPEED_COLUMNS = {"decode": "decode_tok_s", "prefill": "prefill_tok_s"}


def exempt(share: Figure) -> bool:
    """A drafted decode's share may pass 1: more than one token per weight read."""
    drafted = share.axes.get("spec_mode") not in (None, NO_DRAFT)
    return drafted and share.metric == f"decode{SHARE_SUFFIX}"


def above_ceiling(catalog: Catalog) -> list[Figure]:
    """Every share of a ceiling above 1 that no exemption covers."""
    return [
        f
        for f in catalog.figures
        if f.metric.endswith(SHARE_SUFFIX) and f.value is not None and f.value > 1 and not exempt(f)
    ]


def share_above_ceiling(catalog: Catalog) -> Finding | None:
    over = above_ceiling(catalog)
    if not over:
        return None
    worst = max(over, key=lambda f: f.value)
    phases = sorted({f.metric.removesuffix(SHARE_SUFFIX) for f in over})
    return Finding(
        "share_above_ceiling",
        f"In {len(over)} cell(s) a measured speed exceeds its physical ceiling ({', '.join(phases)}; worst "
        f"x{worst.value:.2f}, {worst.figure_id}): the ceiling is no upper bound there, a defect of its peak "
        "or of its cost per token, and those shares are not results. (A drafted decode may pass its "
        "bandwidth ceiling, verifying several tokens per weight read: it is exempt.)",
        frozenset(s for f in over for s in f.shot_ids),
        columns=frozenset(SPEED_COLUMNS[phase] for phase in phases),
    )


SHOT_ABOVE_CEILING = "shot_above_decode_ceiling"


def shot_above_decode_ceiling(catalog: Catalog) -> Finding | None:
    """Shots without drafting whose own decode speed passes their cell's decode ceiling (one token per
    weight read at the machine's peak bandwidth): no plain decoder makes tokens faster than it reads
    its weights, so such a shot's time is not the engine's (tokens held back and let go, a clock
    read wrong). It is never a valid speed: a gate strikes the decode figures resting on it."""
    ceilings = {f.cell_id: f.value for f in catalog.figures if f.metric == "decode_ceiling_tok_s" and f.value}
    over: list[str] = []
    worst = 0.0
    for cell, rows in group_cells(catalog.shots):
        ceiling = ceilings.get(cell_id(cell))
        if ceiling is None or cell.get("spec_mode") not in (None, NO_DRAFT):
            continue
        speeds = pd.to_numeric(rows["decode_tok_s"], errors="coerce")
        fast = rows[(rows["status"] == "ok") & (speeds > ceiling)]
        over += list(fast["shot_id"])
        worst = max([worst, *(speeds[fast.index] / ceiling)])
    if not over:
        return None
    return Finding(
        SHOT_ABOVE_CEILING,
        f"{len(over)} shot(s) without drafting decoded faster than their cell's decode ceiling (up to "
        f"x{worst:.1f}): a plain decoder reads its weights once per token, so these timings are not the "
        "engine's (a stream held back and let go); the decode figures resting on them are struck.",
        frozenset(over),
        columns=frozenset({SPEED_COLUMNS["decode"]}),
    )


CEILING_RULES = (share_above_ceiling, shot_above_decode_ceiling)
