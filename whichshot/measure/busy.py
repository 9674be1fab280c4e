"""A process whose shots ran beside other work is re-run, not filtered afterwards.

After each process the protocol asks busy_because of its shots: the busiest ok shot whose other
work (host_foreign_cores, measure.host_load) is above the host_busy threshold (busy_threshold_cores,
the one the caveat uses). Up to protocol.replace_busy processes of a series are replaced: their
shots stay in the series' journal with the status replaced (and their own shot ids), never counted,
and the same positions run again in a new process (process_start_reason replaces_busy). Every shot
records how many of its series' processes were replaced before its own started (busy_replaced).
A process past the limit is kept, and the host_busy caveat names its shots as before.
"""

from typing import Any

from whichshot.measure.host_load import busy_threshold_cores

REPLACED = "replaced"  # the status of a replaced process's shots
REPLACES_BUSY = "replaces_busy"  # process_start_reason of the process that re-runs them


def busy_because(records: list[dict[str, Any]]) -> str | None:
    """Why these shots' process ran beside other work (its busiest ok shot against the threshold);
    None where no ok shot's other work was measured above it."""
    worst, words = 0.0, None
    for record in records:
        cores = record.get("host_foreign_cores")
        if record["status"] != "ok" or cores is None:
            continue
        limit = busy_threshold_cores(record.get("cpu_count"), record.get("threads"))
        if cores > limit and cores - limit > worst:
            worst = cores - limit
            words = (f"{cores:.2f} cores of other work beside shot {record['series_position']} "
                     f"(the host_busy threshold: {limit:.2f})")  # fmt: skip
    return words


def mark_replaced(records: list[dict[str, Any]], because: str, count: int) -> None:
    """The shots of the series' `count`-th replaced process: status replaced, the reason, and a shot
    id of their own (the positions' ids go to the shots that replace them). Changed in place."""
    for record in records:
        record["replaced_because"] = (
            because if record["status"] == "ok" else f"{because}; was {record['status']}"
        )
        record["status"] = REPLACED
        record["shot_id"] = f"{record['shot_id']}.replaced{count}"


def replaced_processes(records: list[dict[str, Any]]) -> int:
    """How many of the series' processes these records say were replaced."""
    return len({record["process_id"] for record in records if record["status"] == REPLACED})


def kept(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records that count: every one but a replaced process's."""
    return [record for record in records if record["status"] != REPLACED]
