"""The grid: config -> the list of series (jobs) it expands to. One job is one JSONL file."""

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Job:
    """One series of shots under one protocol, run start to finish by one Snakemake job."""

    job_id: str
    engine: str
    model: str
    prompt_tokens: int
    protocol: str  # "cold": a fresh process per shot; "warm": consecutive shots in one process
    rest_s: float
    repeat: int
    series_length: int

    def fresh_process_before(self, position: int) -> bool:
        """Whether shot `position` (1-based) of the series must be the first of a new process."""
        return self.protocol == "cold" or position == 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _protocols(protocol: dict[str, Any]) -> list[tuple[str, float, int]]:
    found = []
    if protocol.get("cold_processes", 3) > 0:
        found.append(("cold", 0.0, protocol.get("cold_processes", 3)))
    if protocol.get("warm_shots", 6) > 0:
        for rest_s in protocol.get("rests_s", [0]):
            found.append(("warm", float(rest_s), protocol.get("warm_shots", 6)))
    return found


def _rest_label(rest_s: float) -> str:
    return f"{rest_s:g}".replace(".", "p")


def expand_jobs(config: dict[str, Any]) -> list[Job]:
    """engines x models x prompt lengths x protocols x rests x repeats, in a stable order."""
    protocol = config["protocol"]
    jobs = []
    for engine in config["engines"]:
        for model in config["models"]:
            for length in config["prompts"]["lengths"]:
                for name, rest_s, series_length in _protocols(protocol):
                    for repeat in range(1, protocol.get("repeats", 1) + 1):
                        label = "cold" if name == "cold" else f"warm-rest{_rest_label(rest_s)}s"
                        job_id = f"{engine}.{model}.p{length}.{label}.rep{repeat}"
                        jobs.append(Job(job_id, engine, model, length, name, rest_s, repeat, series_length))
    return jobs


def job_by_id(config: dict[str, Any], job_id: str) -> Job:
    """Look a job up by its id (raises KeyError for an id the config does not produce)."""
    for job in expand_jobs(config):
        if job.job_id == job_id:
            return job
    raise KeyError(job_id)
