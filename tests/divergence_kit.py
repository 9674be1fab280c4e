"""The divergence probe (measure/divergence_probe.py) asked for real after a pipeline run whose drafted
outputs did not part from the undrafted ones (so the run's own probe had nothing to ask): a drafted
record is made to part from the run's own undrafted output at PARTS_AT, and the probe starts the
undrafted configuration's engine and reads its candidates there both ways. The engine and the probe are
real; only the divergence is written here. tests/test_engine_transformers.py and tests/test_e2e_vllm.py
use it on their runs."""

from pathlib import Path
from typing import Any

from whichshot.config import with_defaults
from whichshot.host import host_identity
from whichshot.measure.divergence_probe import TOP_N, probe_divergences, probed_pairs
from whichshot.measure.grid import all_jobs
from whichshot.measure.plan import SeriesInputs, job_context, prompt_entries, series_plan
from whichshot.prepare.series_prompts import series_prompts_path
from whichshot.shots.divergence import CHANGED, divergence_fields, path_spread
from whichshot.tables import read_jsonl

PARTS_AT = 40  # where the drafted record parts from the undrafted output


def probe_parted_output(
    workdir: Path, config: dict[str, Any], engine: str, log_dir: Path
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the probe's record, the undrafted series' shots) for the run's first drafted series of
    `engine` (a config engines name) with an undrafted counterpart, its shots parted at PARTS_AT."""
    config = with_defaults(config)
    jobs = {job.job_id: job for job in all_jobs(config)}
    drafted_id, undrafted_id = next((d, u) for d, u in probed_pairs(jobs).items() if jobs[d].engine == engine)
    job, results = jobs[undrafted_id], workdir / "results"
    prompts = series_prompts_path(results / "prompts" / engine / f"{job.model}.json", *prompt_entries(job))
    model = results / "models" / f"{job.model}.json"
    inputs = SeriesInputs(results / "engines" / engine / "build.json", model, prompts)
    undrafted = read_jsonl([results / "shots" / f"{undrafted_id}.jsonl"])
    drafted = read_jsonl([results / "shots" / f"{drafted_id}.jsonl"])
    for shot in drafted:
        assert len(shot["output_token_ids"]) > PARTS_AT, "an output too short to part at PARTS_AT"
        shot["output_token_ids"][PARTS_AT] += 1  # another token than the undrafted one there
    plan = {**series_plan(config, job), "log_dir": str(log_dir)}
    ctx = job_context(plan, inputs, host_identity())
    return probe_divergences(ctx, drafted_id, drafted, undrafted), undrafted


def check_probed_entries(
    record: dict[str, Any], undrafted: list[dict[str, Any]], spread_below: float
) -> None:
    """Each shot's entry is the target's own: the one-token path writes the undrafted shot's prefix
    again and ranks first the token it wrote at the divergence; both paths give TOP_N candidates,
    most likely first; the two paths move a gap between any two of them by less than spread_below
    (rounding, nothing more);
    the token written here, no near-tie of the target, is told as a change."""
    assert record["not_run"] is None and record["error"] is None, record
    written = {shot["shot_id"]: shot["output_token_ids"] for shot in undrafted}
    assert len(record["shots"]) == len(undrafted)
    for entry in record["shots"]:
        real = written[entry["counterpart_shot_id"]]
        where = (entry["position"], entry["undrafted_token"], entry["drafted_token"])
        assert where == (PARTS_AT, real[PARTS_AT], real[PARTS_AT] + 1)
        assert entry["prefix_repeated"] and entry["one_token"][0][0] == real[PARTS_AT]
        for path in (entry["one_token"], entry["batched"]):
            logprobs = [logprob for _token, logprob in path]
            assert len(path) == TOP_N and logprobs == sorted(logprobs, reverse=True) and logprobs[0] <= 0
        # how far the paths moved any gap among all TOP_N candidates (the token written here may be
        # none of them, and path_spread looks only at those as likely as the tokens at issue)
        spread = path_spread({**entry, "drafted_token": entry["one_token"][-1][0]})
        assert spread is not None and spread < spread_below, spread
        lead = entry["one_token"][0][1] - entry["one_token"][1][1]
        assert entry["batched"][0][0] == real[PARTS_AT] or lead <= spread
        # against that spread as the threshold (near_tie_threshold finds none where the token written
        # is outside the candidates, as here on vLLM), the token written is a change
        assert divergence_fields(False, entry, spread)["divergence_outcome"] == CHANGED
