"""Hand-made records of the server's verify probe (results/bench/<job>.json, key verify_probe), as
measure/verify_probe.py writes them, for tests of what the figures make of them."""

from typing import Any

from whichshot.measure.verify_probe import ACCEPT_ALL, ACCEPT_NONE, ONE_TOKEN_WIDTH, SERIES_DRAFTER


def readings(steps: list[tuple[float, int, int, int]]) -> list[list[float]]:
    """Cumulative readings from the first token on, from (ms, emitted, drafted, accepted) per step."""
    found = [[1, 0.01, 0, 0]]
    for ms, emitted, drafted, accepted in steps:
        n, t, d, a = found[-1]
        found.append([n + emitted, t + ms, d + drafted, a + accepted])
    return found


def probe_record(
    width: int,
    one_ms: list[float],
    none_ms: list[float],
    all_ms: list[float],
    steps: int = 4,
    foreign_cores: float = 0.0,
    drafter_ms: list[float] | None = None,
) -> dict[str, Any]:
    """A probe at one verify width whose timed requests' steady steps took these ms (one request
    each, after a warm-up request of the first time), on 2 cores with 2 engine threads and this much
    other work beside each request; with drafter_ms, the series' drafter's plain steps too."""

    def point(server: str, at: int, times: list[float]) -> dict[str, Any]:
        drafted = 0 if at == ONE_TOKEN_WIDTH else at - 1
        accepted = drafted if server == ACCEPT_ALL else 0
        requests = [
            {"warm_up": i == 0, "readings": readings([(ms, accepted + 1, drafted, accepted)] * (steps + 1)),
             "prompt_n": 1, "cache_n": 99, "host_foreign_cores": foreign_cores}
            for i, ms in enumerate([times[0], *times])
        ]  # fmt: skip
        return {"server": server, "width": at, "prompt_tokens": 100, "requests": requests}

    points = [point(ACCEPT_NONE, ONE_TOKEN_WIDTH, one_ms), point(ACCEPT_NONE, width, none_ms),
              point(ACCEPT_ALL, width, all_ms)]  # fmt: skip
    if drafter_ms is not None:
        points.append(point(SERIES_DRAFTER, ONE_TOKEN_WIDTH, drafter_ms))
    return {"not_run": None, "error": None, "widths": [width], "points": points, "threads": 2, "cpu_count": 2}
