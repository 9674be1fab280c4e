"""The server's verify probe (measure/verify_probe.py) read back from results/bench/<job>.json: the
decode steps of each request, from the engine's own readings, and each timed request's median step
at each point the probe timed (the one-token step; each verify width with every draft accepted, or
none).

A step's time, as llama-server keeps it, runs from the end of the step before to the end of its own
sampling: it holds the sending of the step before's tokens. A steady step is one whose drafts and
acceptance are the point's and whose step before emitted as many tokens (the first step follows the
first token, one token): its time is the point's cost in a run of such steps, as a series pays it."""

import statistics
from dataclasses import dataclass
from typing import Any

from whichshot.measure.verify_probe import ACCEPT_ALL, ACCEPT_NONE, ONE_TOKEN_WIDTH

# A request's median needs this many steady steps (fewer: the request gives no sample).
MIN_STEADY_STEPS = 3


@dataclass(frozen=True)
class Step:
    """One decode step of a probe request: its time and its tokens, by the engine's count."""

    ms: float
    emitted: int
    drafted: int
    accepted: int


def steps_of(readings: list[list[float]]) -> list[Step]:
    """The steps between consecutive readings ([tokens, ms, drafted, accepted] so far, the first
    at the first token)."""
    return [
        Step(b[1] - a[1], int(b[0] - a[0]), int(b[2] - a[2]), int(b[3] - a[3]))
        for a, b in zip(readings, readings[1:], strict=False)
    ]


def point_shape(server: str, width: int) -> Step:
    """The tokens of a steady step at a point (its ms left 0): drafts, acceptance, tokens emitted."""
    drafted = 0 if width == ONE_TOKEN_WIDTH else width - 1
    accepted = drafted if server == ACCEPT_ALL else 0
    return Step(0.0, accepted + 1, drafted, accepted)


def steady_median_ms(readings: list[list[float]], server: str, width: int) -> float | None:
    """The median time of a request's steady steps at the point (None: too few of them)."""
    shape = point_shape(server, width)
    steps = steps_of(readings)
    emitted_before = [int(readings[0][0]), *(s.emitted for s in steps)] if readings else []
    steady = [
        s.ms
        for s, before in zip(steps, emitted_before, strict=False)
        if (s.emitted, s.drafted, s.accepted) == (shape.emitted, shape.drafted, shape.accepted)
        and before == shape.emitted
    ]
    return statistics.median(steady) if len(steady) >= MIN_STEADY_STEPS else None


@dataclass(frozen=True)
class PointSamples:
    """One point's samples over a cell's probes (a timed request's steady median each, in ms) and
    the records they came from."""

    server: str
    width: int
    samples_ms: list[float]
    sources: list[str]

    @property
    def name(self) -> str:
        return f"{self.server}.w{self.width}"


def probe_source(job_id: str) -> str:
    """The source id of a series' server verify probe (a point's adds .{server}.w{width})."""
    return f"llama-server:results/bench/{job_id}.json#verify_probe"


def point_samples(probes: list[tuple[str, dict[str, Any]]], server: str, width: int) -> PointSamples:
    """Every timed request's sample at the point, over the probes (job id, record)."""
    samples, sources = [], []
    for job_id, probe in probes:
        for point in probe.get("points", []):
            if (point["server"], point["width"]) != (server, width):
                continue
            taken = [
                steady_median_ms(r["readings"], server, width) for r in point["requests"] if not r["warm_up"]
            ]
            samples += [s for s in taken if s is not None]
            sources.append(f"{probe_source(job_id)}.{server}.w{width}")
    return PointSamples(server, width, samples, sources)


def probed_widths(probes: list[tuple[str, dict[str, Any]]]) -> list[int]:
    """The verify widths every one of the probes timed (the one-token step aside)."""
    sets = [
        {p["width"] for p in probe.get("points", []) if p["width"] != ONE_TOKEN_WIDTH}
        for _job, probe in probes
    ]
    return sorted(set.intersection(*sets)) if sets else []


def one_token(probes: list[tuple[str, dict[str, Any]]]) -> PointSamples:
    return point_samples(probes, ACCEPT_NONE, ONE_TOKEN_WIDTH)
