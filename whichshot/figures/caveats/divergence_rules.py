"""Caveats of a drafted output that parts from the no-draft one only at near-ties of the target
(shots.divergence: the speed-up keeps its figure, the caveat names where and by how much), and of a
no-draft output that does not repeat across its cell (the lossless check rests on it)."""

import pandas as pd

from whichshot.figures.catalog import Catalog
from whichshot.figures.caveats.comparison_rules import OUTPUT_DEPENDENT
from whichshot.figures.caveats.finding import whole_cells
from whichshot.shots.caveat import Finding, flag_false
from whichshot.shots.divergence import NEAR_TIE, outcome_text

NEAR_TIE_DIVERGENCE = "near_tie_divergence"
UNDRAFTED_NOT_REPEATED = "undrafted_output_not_repeated"


def near_tie_divergence(catalog: Catalog) -> Finding | None:
    """Drafted shots whose output parts from the no-draft one where the target's two tokens are
    within the run's measured near-tie threshold."""
    shots = catalog.shots
    tied = (shots["status"] == "ok") & (shots["divergence_outcome"] == NEAR_TIE)
    if not tied.any():
        return None
    rows = shots[tied].sort_values("first_divergence_token").drop_duplicates("job_id")
    where = "; ".join(f"{r['shot_id']} {outcome_text(r)}" for r in rows.head(4).to_dict("records"))
    threshold = float(rows["near_tie_threshold_logprob"].iloc[0])
    return Finding(
        NEAR_TIE_DIVERGENCE,
        f"{int(tied.sum())} drafted shot(s) part from the no-draft output only where the target's two "
        f"tokens are within this run's near-tie threshold, {threshold:.3g} in log-probability ({where}): "
        "that is how far evaluating the same prefix in one batch (as a verification does) instead of one "
        "token at a time moved a gap between two of the target's candidates in this run. The evaluation "
        "path, not a draft, decided these tokens: the speed-up keeps its figure, and after the divergence "
        "the two outputs are different text.",
        whole_cells(shots, tied),
        columns=OUTPUT_DEPENDENT,
    )


def undrafted_output_not_repeated(catalog: Catalog) -> Finding | None:
    """Workload cells whose no-draft shots of one prompt wrote different tokens."""
    shots = catalog.shots
    varied = (shots["status"] == "ok") & flag_false(shots["undrafted_repeats"])
    if not varied.any():
        return None
    return Finding(
        UNDRAFTED_NOT_REPEATED,
        f"Without drafting, the same prompt gave different outputs across the cell's processes "
        f"({_cells(shots[varied])}): the engine is not deterministic here, and the lossless check, which "
        "compares each drafted shot with the no-draft shot at its position, rests on that one output.",
        whole_cells(shots, varied),
        columns=OUTPUT_DEPENDENT,
    )


def _cells(rows: pd.DataFrame) -> str:
    return ", ".join(sorted({f"{r['workload']} ({r['text_kind']})" for r in rows.to_dict("records")})[:4])


DIVERGENCE_RULES = (near_tie_divergence, undrafted_output_not_repeated)
