"""Caveats about the user's request traces: requests left out of a mix, because they do not fit the
context or because a mode has no value for them."""

from whichshot.figures.catalog import Catalog
from whichshot.figures.cells import group_cells, shots_in
from whichshot.figures.trace_figures import MIX_AXES, MIX_METRICS
from whichshot.shots.axes import TRACE_WORKLOAD
from whichshot.shots.caveat import Finding, ids

TRACE_REQUESTS_SKIPPED = "trace_requests_skipped"


def trace_requests_skipped(catalog: Catalog) -> Finding | None:
    """Requests skipped for their length (each model's tokenizer decides): every figure of their
    trace on that engine and model leaves them out, the mix first."""
    traced = catalog.shots[catalog.shots["workload"] == TRACE_WORKLOAD]
    parts, affected = [], set()
    for _mix, rows in group_cells(traced, ("engine", "model", "trace")):
        skipped = rows[rows["status"] == "skipped"]
        if skipped.empty:
            continue
        first = rows.iloc[0]
        reasons = "; ".join(
            f"{r['request_id']}: {r['error'].removeprefix('skipped: ')}"
            for _, r in skipped.drop_duplicates("request_id").head(3).iterrows()
        )
        parts.append(f"trace {first['trace']} on {first['model']}: {skipped['request_id'].nunique()} of "
                     f"{rows['request_id'].nunique()} requests ({reasons})")  # fmt: skip
        affected |= ids(rows)
    if not parts:
        return None
    return Finding(
        TRACE_REQUESTS_SKIPPED,
        f"Requests were not run because their prompt and output do not fit the context ({'; '.join(parts)}); "
        "they are left out, never cut: the trace's mix figures stand for the requests that ran. Raise "
        "traces.<name>.context_tokens to run them.",
        frozenset(affected),
    )


def trace_mix_incomplete(catalog: Catalog) -> Finding | None:
    """Mix figures that leave out requests that ran (a mode without a value for them: failed shots)."""
    traced = catalog.shots[catalog.shots["workload"] == TRACE_WORKLOAD]
    request_of = traced.set_index("shot_id")["request_id"]
    named, affected = [], set()
    for fig in catalog.figures:
        if fig.metric not in MIX_METRICS or not fig.shot_ids:
            continue
        where = {axis: fig.axes.get(axis) for axis in MIX_AXES}
        if fig.axes.get("text_kind") is not None:
            where["text_kind"] = fig.axes["text_kind"]
        group = shots_in(traced, where)
        ran = set(group.loc[group["status"] != "skipped", "request_id"])
        missing = sorted(ran - set(request_of.loc[fig.shot_ids]))
        if missing:
            named.append(f"{fig.figure_id} leaves out {', '.join(missing)}")
            affected |= set(fig.shot_ids) | set(group.loc[group["request_id"].isin(missing), "shot_id"])
    if not named:
        return None
    return Finding(
        "trace_mix_incomplete",
        f"{len(named)} mix figure(s) leave out requests that ran but have no value in some mode (failed "
        f"shots): {'; '.join(named[:3])}. Every mode's mix uses the same requests; the mix is not the "
        "whole trace's.",
        frozenset(affected),
    )


TRACE_RULES = (trace_requests_skipped, trace_mix_incomplete)
