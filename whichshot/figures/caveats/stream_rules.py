"""Caveats about several requests in flight at once: the one-request columns of such a shot are
stream 1's (whichshot.measure.protocol), the stream_* and aggregate_* columns every stream's."""

from whichshot.figures.catalog import Catalog
from whichshot.figures.statistic import ok_rows
from whichshot.measure.records import SERVER_COUNTER_COLUMNS, STREAM_COLUMNS, empty_result_fields
from whichshot.shots.axes import ONE_STREAM
from whichshot.shots.caveat import Finding, columns_from, ids

# The timings and counts of one request (client and engine): with N streams, stream 1's. The
# server's counter deltas are process-wide over the shot, so every stream's.
_TIMED = columns_from("client", "engine") - frozenset(SERVER_COUNTER_COLUMNS)
ONE_REQUEST_COLUMNS = frozenset(empty_result_fields()) & _TIMED
ALL_STREAMS_COLUMNS = frozenset(STREAM_COLUMNS)


def stream_one_of_several(catalog: Catalog) -> Finding | None:
    """Figures of cells with several streams in flight that rest on stream 1's request alone."""
    shots = ok_rows(catalog.shots)
    several = shots[shots["parallel_streams"].fillna(ONE_STREAM) > ONE_STREAM]
    if several.empty:
        return None
    streams = sorted({int(n) for n in several["parallel_streams"]})
    return Finding(
        "stream_one_of_several",
        f"In {several['job_id'].nunique()} series {'/'.join(map(str, streams))} requests were in flight at "
        "once: their TTFT, prefill and decode tok/s (client and engine) and the engine's counts are stream "
        "1's of N, one request among others, not what the N streams did together (stream_ttft_max_s, "
        "stream_decode_tok_s_mean/min and aggregate_decode_tok_s are; figures reading those carry no "
        "caveat).",
        ids(several),
        columns=ONE_REQUEST_COLUMNS,
        spares=ALL_STREAMS_COLUMNS,
    )


STREAM_RULES = (stream_one_of_several,)
