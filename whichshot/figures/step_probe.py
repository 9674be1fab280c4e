"""The server's verify probe (measure/verify_probe.py) read back from results/bench/<job>.json: each
timed request's median steady step (measure/probe_steps.py) at each point the probe timed (the
one-token step; each verify width with every draft accepted, or none), over the requests the probe
kept as the point's samples (its `window`: the last timed requests, measure/settle.py; a record of
before issue 53 has none, and keeps every request after its warm-up), and how often it repeated them."""

from dataclasses import dataclass
from typing import Any

from whichshot.measure.probe_steps import ACCEPT_NONE, ONE_TOKEN_WIDTH, steady_median_ms


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
            taken = [steady_median_ms(r["readings"], server, width) for r in kept_requests(point)]
            samples += [s for s in taken if s is not None]
            sources.append(f"{probe_source(job_id)}.{server}.w{width}")
    return PointSamples(server, width, samples, sources)


def kept_requests(point: dict[str, Any]) -> list[dict[str, Any]]:
    """The requests whose samples are the point's: its window, or (older records) every timed one."""
    if "window" in point:
        return [point["requests"][i] for i in point["window"]]
    return [r for r in point["requests"] if not r["warm_up"]]


def timed_requests(probes: list[tuple[str, dict[str, Any]]]) -> list[int]:
    """How many timed requests each point of the probes ran (warm-ups aside)."""
    return [
        sum(not r["warm_up"] for r in point["requests"])
        for _job, probe in probes
        for point in probe.get("points", [])
    ]


def probed_widths(probes: list[tuple[str, dict[str, Any]]]) -> list[int]:
    """The verify widths every one of the probes timed (the one-token step aside)."""
    sets = [
        {p["width"] for p in probe.get("points", []) if p["width"] != ONE_TOKEN_WIDTH}
        for _job, probe in probes
    ]
    return sorted(set.intersection(*sets)) if sets else []


def one_token(probes: list[tuple[str, dict[str, Any]]]) -> PointSamples:
    return point_samples(probes, ACCEPT_NONE, ONE_TOKEN_WIDTH)
