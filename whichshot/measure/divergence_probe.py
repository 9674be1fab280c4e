"""The target's margin where a drafted output first parts from the undrafted one (issue 50), measured.

Why: a verification evaluates the tokens it checks in one batch, and batched kernels round otherwise
than one-token decoding. Where the target's top two tokens are nearly tied, that alone can flip which
one comes out: the drafted output then parts from the undrafted one without any draft having changed
what the model writes. Only the target's own probabilities at that position tell the two apart.

How: after a drafted workload series and its undrafted counterpart, one process of the undrafted
configuration (the counterpart's plan: same build, model and server settings, no drafting) is asked,
for every drafted shot whose output parts from its counterpart's at token k, for its TOP_N most likely
tokens at k given the prompt and the shared prefix (the tokens before k), two ways: decoding the prefix
one token at a time (the undrafted path) and evaluating it in one batch with the prompt (the path of a
verification); whichshot.engine.candidates defines both for every kind that reports its candidates.
The record keeps both lists; shots.divergence classifies the divergence from them. A failure is
recorded, never raised: the series' shots are the run's product."""

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whichshot.atomic import write_json_atomic
from whichshot.engine.machine_lock import measurement_lock
from whichshot.host import host_identity
from whichshot.measure.grid import Job
from whichshot.measure.plan import SeriesInputs, job_context
from whichshot.measure.protocol import JobContext, prompt_of
from whichshot.shots.axes import BASE_WORKLOAD, NO_DRAFT
from whichshot.shots.lossless import counterpart_key
from whichshot.shots.quality import first_divergence
from whichshot.tables import read_jsonl

TOP_N = 10  # enough to find the drafted token's rank where it is not the runner-up
ONE_TOKEN, BATCHED = "one_token", "batched"


def probed_pairs(jobs: dict[str, Job]) -> dict[str, str]:
    """Drafted series whose outputs are checked against an undrafted one (the lossless check's
    series: every workload's but continue_text's) -> the job id of that undrafted counterpart."""
    pairs = {}
    for job_id, job in jobs.items():
        counterpart = dataclasses.replace(job, spec_mode=NO_DRAFT).job_id
        if job.spec_mode != NO_DRAFT and job.workload != BASE_WORKLOAD and counterpart in jobs:
            pairs[job_id] = counterpart
    return pairs


@dataclass(frozen=True)
class Divergence:
    """A drafted shot whose output parts from its undrafted counterpart's at `position`."""

    shot_id: str
    counterpart_shot_id: str
    prompt_variant: str
    position: int
    prefix: list[int]
    undrafted_token: int
    drafted_token: int


def divergences(drafted: list[dict[str, Any]], undrafted: list[dict[str, Any]]) -> list[Divergence]:
    """The drafted ok shots whose output parts from their ok undrafted counterpart's (same cell place,
    repeat and position), each with where and the two tokens there."""
    reference = {counterpart_key(r): r for r in undrafted if r["status"] == "ok"}
    found = []
    for shot in drafted:
        base = reference.get(counterpart_key(shot))
        if shot["status"] != "ok" or base is None:
            continue
        ref_ids, ids = base["output_token_ids"], shot["output_token_ids"]
        k = first_divergence(ref_ids, ids)
        if k is None or k >= min(len(ref_ids), len(ids)):
            continue  # identical, or one output is a prefix of the other (no two tokens to compare)
        found.append(Divergence(shot["shot_id"], base["shot_id"], shot.get("prompt_variant") or "A", k,
                                list(ids[:k]), ref_ids[k], ids[k]))  # fmt: skip
    return found


def not_probed_because(ctx: JobContext) -> str | None:
    """Why this engine kind's target cannot be asked for its candidates (None: it can)."""
    if not getattr(ctx.engine, "reports_top_candidates", False):
        return f"engine kind {ctx.engine.kind!r} does not report its top candidates to whichshot"
    if not ctx.engine.starts_processes(ctx.settings.engine_spec):
        return "whichshot attached to this server: it starts no process of the undrafted configuration"
    return None


def probe_divergences(
    ctx: JobContext, drafted_job_id: str, drafted: list[dict[str, Any]], undrafted: list[dict[str, Any]]
) -> dict[str, Any]:
    """results/divergence/{job}.json: every divergence of the drafted series with the target's top
    candidates there by both paths (asked in ctx, the undrafted series'), or why none was asked
    (`not_run`)."""
    found = divergences(drafted, undrafted)
    record: dict[str, Any] = {"job_id": drafted_job_id, "asked_as": ctx.job.job_id, "not_run": None,
                              "error": None, "top_n": TOP_N, "shots": [],
                              "t_start_mono_s": time.monotonic()}  # fmt: skip
    if not found:
        record["not_run"] = "no drafted output parts from its undrafted counterpart's"
        return record
    if reason := not_probed_because(ctx):
        record["not_run"] = reason
        return record
    try:
        _ask_target(ctx, found, record["shots"])
    except Exception as exc:  # a probe's failure is told in the report, not raised
        record["error"] = f"{type(exc).__name__}: {exc}"
    record["t_end_mono_s"] = time.monotonic()
    return record


def _ask_target(ctx: JobContext, found: list[Divergence], into: list[dict[str, Any]]) -> None:
    """One process of the undrafted configuration answers every divergence, both paths."""
    log_path = Path(ctx.log_dir) / "divergence_probe.log"
    server = ctx.engine.start(ctx.build, ctx.model_path, ctx.settings, log_path)
    try:
        for divergence in found:
            prompt = prompt_of(ctx, divergence.prompt_variant)["token_ids"]
            into.append({**_described(divergence), **_both_paths(server, ctx, prompt, divergence.prefix)})
    finally:
        server.stop()


def _both_paths(server: Any, ctx: JobContext, prompt: list[int], prefix: list[int]) -> dict[str, Any]:
    one = server.top_candidates(prompt, prefix, False, TOP_N, ctx.shot_timeout_s)
    batch = server.top_candidates(prompt, prefix, True, TOP_N, ctx.shot_timeout_s)
    return {
        ONE_TOKEN: _pairs(one["top"]),
        BATCHED: _pairs(batch["top"]),
        "prefix_repeated": one["decoded"] == prefix,  # the one-token replay made the shared prefix again
    }


def _pairs(top: dict[int, float]) -> list[list[float]]:
    """[[token, log-probability], ...], most likely first (JSON keeps no int keys)."""
    return [[token, logprob] for token, logprob in sorted(top.items(), key=lambda item: -item[1])]


def _described(divergence: Divergence) -> dict[str, Any]:
    return {
        "shot_id": divergence.shot_id,
        "counterpart_shot_id": divergence.counterpart_shot_id,
        "position": divergence.position,
        "undrafted_token": divergence.undrafted_token,
        "drafted_token": divergence.drafted_token,
    }


def run_divergence_probe(
    plan: dict[str, Any], inputs: SeriesInputs, drafted_job_id: str, shots: tuple[Path, Path], out_path: Path
) -> None:
    """A probe_divergence job: the drafted series' divergences asked of its undrafted counterpart's
    configuration (plan: the counterpart's series plan; inputs: its SeriesInputs), on this machine
    alone (the measurement lock), written to out_path; shots: the drafted and the undrafted series'."""
    ctx = job_context(plan, inputs, host_identity())
    with measurement_lock():
        record = probe_divergences(ctx, drafted_job_id, *(read_jsonl([path]) for path in shots))
    write_json_atomic(out_path, record)
