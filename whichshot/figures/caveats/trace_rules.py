"""Caveats about the user's request traces: requests left out because they do not fit the context."""

from whichshot.figures.catalog import Catalog
from whichshot.figures.caveats.finding import Finding, ids
from whichshot.measure.grid import TRACE_WORKLOAD

TRACE_REQUESTS_SKIPPED = "trace_requests_skipped"


def trace_requests_skipped(catalog: Catalog) -> Finding | None:
    """Requests skipped for their length: every figure of their trace leaves them out, the mix first."""
    shots = catalog.shots
    traced = shots[shots["workload"] == TRACE_WORKLOAD]
    skipped = traced[traced["status"] == "skipped"]
    if skipped.empty:
        return None
    parts = []
    for trace, rows in skipped.groupby("trace", sort=False):
        total = traced.loc[traced["trace"] == trace, "request_id"].nunique()
        reasons = rows.drop_duplicates("request_id").head(3)
        listed = "; ".join(
            f"{r['request_id']}: {r['error'].removeprefix('skipped: ')}" for _, r in reasons.iterrows()
        )
        parts.append(f"trace {trace}: {rows['request_id'].nunique()} of {total} requests ({listed})")
    return Finding(
        TRACE_REQUESTS_SKIPPED,
        f"Requests were not run because their prompt and output do not fit the context ({'; '.join(parts)}); "
        "they are left out, never cut: the trace's mix figures stand for the requests that ran. Raise "
        "traces.<name>.context_tokens to run them.",
        ids(traced[traced["trace"].isin(skipped["trace"])]),
    )


TRACE_RULES = (trace_requests_skipped,)
