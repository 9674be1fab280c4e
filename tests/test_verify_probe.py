"""The server's verify probe (issue 45): each decode step timed by llama-server itself, with every
draft accepted or none at the verify widths asked, read back into the cost model's inputs; and the
model that splits a verification step into its forward pass and its accepted tokens."""

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from engines.llama_cpp import add_step_reading
from tests.fault_kit import child_processes, job_context, warm_job
from tests.probe_records import probe_record, readings
from tests.shot_tables import cell, series, table
from whichshot.config import check_config
from whichshot.engine import load_engine
from whichshot.engine.machine_lock import measurement_lock
from whichshot.engine.sse import MalformedStream
from whichshot.figures.aggregations import compute
from whichshot.figures.speedup_model_figures import (
    ACCEPTED_SHARE,
    DRAFTER_SHARE,
    DRAFTER_STEP,
    KERNEL_SHARE,
    PLAIN_STEP_MS,
    PREDICTED_SPEEDUP,
    PROBE_REPETITIONS,
    PROBE_SPREAD,
)
from whichshot.figures.step_probe import point_samples
from whichshot.figures.table import compute_figures
from whichshot.measure.probe_steps import steady_median_ms, steps_of
from whichshot.measure.verify_probe import (
    ACCEPT_ALL,
    ACCEPT_NONE,
    ONE_TOKEN_WIDTH,
    SERIES_DRAFTER,
    ProbePlan,
    drafter_prompt,
    probe_plan,
    probe_prompt,
    prompt_length,
    time_verify_steps,
)

REPO = Path(__file__).resolve().parent.parent
PROBE = {"enabled": True, "widths": [], "repetitions": 2, "steps": 4, "max_repetitions": 4, "max_warm_ups": 3,
         "settle_factor": 1.05}  # fmt: skip
BENCH = {"enabled": True, "verify_probe": PROBE}
# A drafted series' ok shots: cap 16, prompts of 300 tokens, outputs of 200 -> depth 400.
SHOTS = [{"status": "ok", "output_tokens": 200, "prompt_tokens": 300, "spec_draft_cap_tokens": 16}] * 2


def _drafted_ctx(tmp_path, context: int = 2048, **job):
    fields = {"spec_mode": "ngram_simple", "context_tokens": context, **job}
    context_tokens = fields.pop("context_tokens")
    return job_context(tmp_path, dataclasses.replace(warm_job(2, context=context_tokens), **fields))


# -- reading the server's step readings ------------------------------------------------------------
def test_an_event_of_the_same_step_updates_its_reading_and_a_new_time_starts_the_next():
    readings: list[list[float]] = []
    for n, ms, drafted, accepted in [(1, 0.01, 0, 0), (2, 9.0, 4, 4), (6, 9.0, 4, 4), (7, 19.0, 8, 8)]:
        add_step_reading(readings, {"timings": {"predicted_n": n, "predicted_ms": ms, "draft_n": drafted,
                                                "draft_n_accepted": accepted}})  # fmt: skip
    assert readings == [[1, 0.01, 0, 0], [6, 9.0, 4, 4], [7, 19.0, 8, 8]]
    add_step_reading(readings, {"timings": {"predicted_n": 8, "predicted_ms": 30.0}})  # no draft yet: 0
    assert readings[-1] == [8, 30.0, 0, 0]
    with pytest.raises(MalformedStream, match="per-token timings"):
        add_step_reading(readings, {"content": "x"})  # timings_per_token not honoured


def test_steps_are_the_differences_of_thereadings():
    steps = steps_of(readings([(10.0, 5, 4, 4), (12.0, 1, 4, 0)]))
    assert [(s.emitted, s.drafted, s.accepted) for s in steps] == [(5, 4, 4), (1, 4, 0)]
    assert [s.ms for s in steps] == pytest.approx([10.0, 12.0])


def test_a_steady_step_follows_a_step_of_the_same_tokens():
    """Width 5, all accepted: the first step follows the first token (one token sent, not five) and
    a step after one that drafted nothing likewise; neither counts."""
    steps = [
        (30.0, 5, 4, 4),
        (10.0, 5, 4, 4),
        (11.0, 5, 4, 4),
        (2.0, 1, 0, 0),
        (25.0, 5, 4, 4),
        (12.0, 5, 4, 4),
    ]
    assert steady_median_ms(readings(steps), ACCEPT_ALL, 5) == pytest.approx(11.0)  # 10, 11, 12
    none = [(8.0, 1, 4, 0)] * 3
    assert steady_median_ms(readings(none), ACCEPT_NONE, 5) == pytest.approx(8.0)  # the first counts here
    assert steady_median_ms(readings(none), ACCEPT_ALL, 5) is None  # nothing accepted: not this point
    assert steady_median_ms(readings(none[:2]), ACCEPT_NONE, 5) is None  # too few steady steps
    plain = [(3.0, 1, 0, 0), (3.5, 1, 0, 0), (4.0, 1, 0, 0)]
    assert steady_median_ms(readings(plain), ACCEPT_NONE, ONE_TOKEN_WIDTH) == pytest.approx(3.5)


def test_a_points_samples_leave_the_warm_up_out_and_name_their_records():
    def request(ms: float, warm_up: bool = False) -> dict:
        return {"warm_up": warm_up, "readings": readings([(ms, 1, 0, 0)] * 3)}

    point = {"server": ACCEPT_NONE, "width": ONE_TOKEN_WIDTH, "requests": [request(99.0, True), request(3.0)]}
    probes = [("job-a", {"points": [point]}), ("job-b", {"points": [{**point, "requests": [request(4.0)]}]})]
    samples = point_samples(probes, ACCEPT_NONE, ONE_TOKEN_WIDTH)
    assert samples.samples_ms == pytest.approx([3.0, 4.0])
    assert samples.sources == [
        f"llama-server:results/bench/{job}.json#verify_probe.accept_none.w2" for job in ("job-a", "job-b")
    ]
    # a record with a window (issue 53): its samples are the window's requests, not every timed one
    windowed = {**point, "requests": [request(99.0, True), request(7.0), request(3.0), request(4.0)],
                "window": [2, 3]}  # fmt: skip
    assert point_samples([("job-c", {"points": [windowed]})], ACCEPT_NONE, 2).samples_ms == pytest.approx(
        [3.0, 4.0]
    )


# -- the cost model ------------------------------------------------------------------------------
# results/reference/cpu_first_run's warm edit_file shot: 217 output tokens, 256 drafted, 194 accepted,
# mean len 13.12 -> 16 verify steps, 6 plain steps; k = 16 drafts and a = 12.125 accepted per step.
EDIT = {"output_tokens": 217, "engine_draft_tokens": 256, "engine_draft_accepted": 194,
        "engine_draft_mean_len": 13.12, "server_spec_drafts_delta": None}  # fmt: skip


def _model(output: str, widths: list[int], ratios: list, spread: float | None = 1.1, rows=(EDIT,)):
    params = {"widths": widths, "spread_limit": 1.25, "output": output}
    return compute("server_step_model", pd.DataFrame(list(rows)), list(EDIT), params, [spread, *ratios])


def test_a_verify_step_costs_its_forward_pass_and_each_accepted_token():
    """At width 17: no draft accepted 2.0 one-token steps, all 16 accepted 6.0: each accepted token
    costs 0.25; the cell's step (k = 16, a = 12.125) costs 2 + 12.125 x 0.25."""
    step = 2.0 + 12.125 * 0.25
    assert _model("speedup", [17], [2.0, 6.0]) == pytest.approx(216 / (6 + 16 * step))
    assert _model("kernel_share", [17], [2.0, 6.0]) == pytest.approx(2.0 / step)
    assert _model("token_share", [17], [2.0, 6.0]) == pytest.approx(12.125 * 0.25 / step)


def test_the_forward_pass_is_linear_between_the_widths_timed():
    """k = 8 drafts a step lies between widths 8 (7 drafts) and 17 (16): none(8) is 1/9 of the way."""
    half = {**EDIT, "engine_draft_tokens": 128}
    none = 1.2 + (2.0 - 1.2) * (8 - 7) / (16 - 7)
    token = 0.1 + (0.25 - 0.1) * (8 - 7) / (16 - 7)
    ratios = [1.2, 2.0, 1.2 + 7 * 0.1, 6.0]  # none(8), none(17), all(8), all(17)
    step = none + 12.125 * token
    assert _model("speedup", [8, 17], ratios, rows=[half]) == pytest.approx(216 / (6 + 16 * step))


def test_a_probe_that_spread_too_far_or_did_not_time_a_point_predicts_nothing():
    assert _model("speedup", [17], [2.0, 6.0], spread=1.3) is None
    assert _model("speedup", [17], [2.0, 6.0], spread=None) is None
    assert _model("speedup", [17], [2.0, None]) is None
    unknown_steps = {**EDIT, "engine_draft_mean_len": None}
    assert _model("speedup", [17], [2.0, 6.0], rows=[unknown_steps]) is None


def test_the_series_drafters_lookup_costs_every_step():
    """d = 1.2: the drafter's lookup costs 0.2 one-token steps on each of the 6 plain and 16
    verification steps; without it (an older record) the model is as above."""
    step = 2.0 + 12.125 * 0.25 + 0.2
    params = {"widths": [17], "spread_limit": 1.25, "drafter": True}

    def with_drafter(output: str) -> float:
        return compute("server_step_model", pd.DataFrame([EDIT]), list(EDIT), {**params, "output": output},
                       [1.1, 2.0, 6.0, 1.2])  # fmt: skip

    assert with_drafter("speedup") == pytest.approx(216 / (6 * 1.2 + 16 * step))
    assert with_drafter("drafter_share") == pytest.approx(0.2 / step)
    assert with_drafter("kernel_share") + with_drafter("token_share") + with_drafter("drafter_share") == (
        pytest.approx(1.0)
    )
    assert with_drafter("speedup") < _model("speedup", [17], [2.0, 6.0])


def test_each_request_of_the_series_drafter_has_a_stretch_of_text_of_its_own():
    text = list(range(1000))
    prompts = [drafter_prompt(text, i, 96) for i in range(8)]
    assert all(len(p) == 96 for p in prompts) and len({p[0] for p in prompts}) == 8
    assert drafter_prompt(text, 0, 96) == text[:96]


def test_a_cell_that_drafted_nothing_runs_at_the_undrafted_speed():
    nothing = {**EDIT, "engine_draft_tokens": 0, "engine_draft_accepted": 0, "engine_draft_mean_len": None}
    assert _model("speedup", [17], [2.0, 6.0], rows=[nothing]) == 1.0
    assert _model("kernel_share", [17], [2.0, 6.0], rows=[nothing]) is None


# -- the plan ------------------------------------------------------------------------------------
def test_the_plan_times_the_caps_width_and_the_asked_ones_up_to_it(tmp_path):
    ctx = _drafted_ctx(tmp_path)
    plan, reason = probe_plan(ctx, SHOTS, BENCH)
    assert reason is None and plan == ProbePlan(
        depth_tokens=400, draft_cap=16, widths=(17,), repetitions=2, steps=4, max_repetitions=4,
        max_warm_ups=3, settle_factor=1.05, context_tokens=2048,
    )  # fmt: skip
    wider = {**BENCH, "verify_probe": {**BENCH["verify_probe"], "widths": [8, 16, 40]}}
    assert probe_plan(ctx, SHOTS, wider)[0].widths == (8, 16, 17)  # 40 is beyond the cap's 17
    assert plan.points() == [(ACCEPT_NONE, ONE_TOKEN_WIDTH), (ACCEPT_NONE, 17), (ACCEPT_ALL, 17),
                             (SERIES_DRAFTER, ONE_TOKEN_WIDTH)]  # fmt: skip


def test_a_request_runs_the_steps_asked_or_as_many_as_the_context_holds(tmp_path):
    """Depth 400, width 17, context 2048: all accepted, a step emits 17 tokens; 93 steps and the
    budget's margin fill 2033 tokens of the 2048. The one-token and none-accepted points run all 200."""
    plan, _ = probe_plan(_drafted_ctx(tmp_path), SHOTS, {**BENCH, "verify_probe": {**PROBE, "steps": 200}})
    assert plan.steps_at(ACCEPT_ALL, 17) == 93 and plan.steps_at(ACCEPT_NONE, 17) == 200
    for server, width in plan.points():
        assert prompt_length(400, width) + plan.output_tokens(server, width) <= 2048
    assert 400 + plan.output_tokens(ACCEPT_ALL, 17, 94) > 2048  # one step more would not fit


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"bench": {**BENCH, "enabled": False}}, "bench.enabled is false"),
        ({"bench": {**BENCH, "verify_probe": {**BENCH["verify_probe"], "enabled": False}}},
         "bench.verify_probe.enabled is false"),
        ({"job": {"spec_mode": "none"}}, "the series drafts nothing"),
        ({"job": {"parallel_streams": 2}}, "the probe times one stream"),
        ({"shots": [{**SHOTS[0], "status": "failed"}]}, "no ok shot with a known draft cap"),
        ({"job": {"context_tokens": 512}}, "does not fit the context (512)"),
        ({"job": {"repeat": 2}, "bench": {**BENCH, "verify_probe": {**BENCH["verify_probe"], "repeats": 1}}},
         "bench.verify_probe.repeats is 1: later repeats of the cell are not probed"),
    ],
)  # fmt: skip
def test_a_series_the_probe_cannot_serve_says_why(tmp_path, change, reason):
    ctx = _drafted_ctx(tmp_path, **change.get("job", {}))
    plan, why = probe_plan(ctx, change.get("shots", SHOTS), change.get("bench", BENCH))
    assert plan is None and reason in why


def test_an_engine_kind_that_cannot_force_acceptance_is_not_probed(tmp_path):
    from whichshot.engine import load_engine

    ctx = dataclasses.replace(_drafted_ctx(tmp_path), engine=load_engine("openai"))
    assert probe_plan(ctx, SHOTS, BENCH) == (None, "the engine kind cannot force its drafts' acceptance")


def test_the_prompt_ends_in_the_repeated_block_at_the_depth():
    text = [5, 6, 5, 7, 8, 9, 10, 11, 12] * 10
    prompt = probe_prompt(text, 4, 30)
    assert len(prompt) == 30 and prompt[-16:] == [5, 6, 7, 8] * 4 and prompt[:14] == text[:14]
    assert probe_prompt(text, 4, 10) == [5, 6, 7, 8] * 4  # the block's repeats are longer than the depth


# -- the real server -----------------------------------------------------------------------------
SERIES_ARGS = ("--spec-type", "ngram-mod")  # the series' own drafting, as config/gpu-speedup-model.yaml's


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """The probe against the real llama-server of the smoke config (SmolLM2-135M, one thread): a
    cap of 8, widths 5 and 9 (8 drafts), requests of eight steps: warmed up until two agree within x1.05
    (at most 3), timed until the last two agree within x1.25 (at most 4)."""
    ctx = _drafted_ctx(tmp_path_factory.mktemp("probe"), context=1024)
    ctx = dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, extra_args=SERIES_ARGS))
    plan = ProbePlan(depth_tokens=96, draft_cap=8, widths=(5, 9), repetitions=2, steps=8, max_repetitions=4,
                     max_warm_ups=3, settle_factor=1.05, context_tokens=1024)  # fmt: skip
    before = {p.pid for p in child_processes()}
    with measurement_lock():
        record = time_verify_steps(ctx, plan)
    return record, plan, [p for p in child_processes() if p.pid not in before]


def test_the_probe_times_every_point_on_the_real_server(probed):
    record, plan, leftover = probed
    assert record["error"] is None and not leftover
    assert [(p["server"], p["width"]) for p in record["points"]] == plan.points()
    for point in record["points"]:
        requests = point["requests"]
        warm_ups, timed = requests[: point["warm_ups"]], requests[point["warm_ups"] :]
        assert all(r["warm_up"] for r in warm_ups) and not any(r["warm_up"] for r in timed)
        assert 2 <= len(warm_ups) <= 3 and 2 <= len(timed) == point["repetitions_run"] <= 4
        assert point["warm_up_settled"] == (_spread(warm_ups[-2:]) <= 1.05)
        # the samples are the last two timed requests; their spread is the record's, under the limit
        # or the cap reached
        assert point["window"] == [len(requests) - 2, len(requests) - 1]
        assert point["spread"] == pytest.approx(_spread([requests[i] for i in point["window"]]))
        assert point["steady"] == (point["spread"] <= 1.25) and (point["steady"] or len(timed) == 4)
        if point["server"] == SERIES_DRAFTER:
            continue  # its drafts may end a request early; its prompts differ (below)
        # read until the steps asked (the connection then closed): one reading per step and the first token
        assert point["steps"] == 8 and all(len(r["readings"]) == 9 for r in requests)
        # the prompt's cache kept between requests: the later ones prefill next to nothing
        assert all(r["prompt_n"] < point["prompt_tokens"] // 2 for r in requests[1:])
        # the host's other work beside each request, as a shot records it
        assert all(r["host_foreign_cores"] is not None for r in requests)


def _spread(requests: list[dict]) -> float:
    medians = [r["steady_median_ms"] for r in requests]
    return max(medians) / min(medians)


def test_the_forced_acceptance_drafts_and_accepts_as_asked(probed):
    """Width w: w - 1 drafts a step, all accepted (w tokens emitted) or none (1); every point gives a
    steady sample per timed request."""
    record, plan, _ = probed
    probes = [("series", record)]
    for server, width in plan.points()[:-1]:
        shapes = {(s.emitted, s.drafted, s.accepted) for p in record["points"]
                  if (p["server"], p["width"]) == (server, width)
                  for r in p["requests"] for s in steps_of(r["readings"])}  # fmt: skip
        drafted = 0 if width == ONE_TOKEN_WIDTH else width - 1
        accepted = drafted if server == ACCEPT_ALL else 0
        assert (accepted + 1, drafted, accepted) in shapes
        samples = point_samples(probes, server, width).samples_ms
        assert len(samples) == 2 and all(ms > 0 for ms in samples)  # the window's two


def test_the_series_drafter_runs_the_series_own_drafting_on_text_of_its_own(probed):
    """Its server has the series' flags; each request prefills a new stretch of text; the steps that
    drafted nothing give its samples (ngram-mod on 96 tokens of documentation drafts little)."""
    record, plan, _ = probed
    assert record["servers"][SERIES_DRAFTER]["args"] == list(SERIES_ARGS)
    (point,) = [p for p in record["points"] if p["server"] == SERIES_DRAFTER]
    assert all(r["prompt_n"] > 48 for r in point["requests"])  # no cache: a prompt it had not seen
    samples = point_samples([("series", record)], SERIES_DRAFTER, ONE_TOKEN_WIDTH).samples_ms
    assert len(samples) == 2 and all(ms > 0 for ms in samples)


# -- the figures ---------------------------------------------------------------------------------
def _drafted_run(probe: dict) -> tuple[dict, dict[str, str]]:
    """A warm recall cell with and without drafting (two series each, EDIT's counts when drafting):
    the figures by metric of the drafted cell, and the caveats that fired."""
    drafted, plain = (cell(workload="verbatim_recall", prompt_tokens_requested=None, spec_mode=m)
                      for m in ("ngram_simple", "none"))  # fmt: skip
    shots = table(
        *(series(plain, [{"decode_tok_s": 30.0, "output_tokens": 217}] * 3, repeat=r) for r in (1, 2)),
        *(series(drafted, [{**EDIT, "decode_tok_s": 75.0}] * 3, repeat=r) for r in (1, 2)),
    )
    runs = [{"job_id": job, "brackets": [], "verify_probe": probe} for job in shots["job_id"].unique()]
    figures, caveats = compute_figures(shots, runs, 0.7)
    cell_figures = {f.metric: f for f in figures if f.axes.get("spec_mode") == "ngram_simple"}
    return cell_figures, {c["caveat_id"]: c for c in caveats}


def test_a_drafted_cell_with_its_probe_gets_the_step_costs_and_the_model():
    """Per series: one-token steps of 10 ms; at width 17, 20 (none accepted) and 60 ms (all): none(17) =
    2.0, all(17) = 6.0, as in the model test above. Every figure recomputes from what it cites."""
    found, caveats = _drafted_run(probe_record(17, [10.0], [20.0], [60.0]))
    assert found[PLAIN_STEP_MS].value == pytest.approx(10.0) and found[PLAIN_STEP_MS].kind == "derived"
    assert found["verify_step_ratio_none_accepted_w17"].value == pytest.approx(2.0)
    assert found["verify_step_ratio_all_accepted_w17"].value == pytest.approx(6.0)
    assert found[PROBE_SPREAD].value == pytest.approx(1.0)
    assert found[PROBE_REPETITIONS].value == 1  # one timed request a point
    assert found[PREDICTED_SPEEDUP].value == pytest.approx(_model("speedup", [17], [2.0, 6.0]))
    assert found[PREDICTED_SPEEDUP].kind == found[KERNEL_SHARE].kind == "inferred"
    assert found[KERNEL_SHARE].value + found[ACCEPTED_SHARE].value == pytest.approx(1.0)
    assert found[PREDICTED_SPEEDUP].source_ids == found[PROBE_SPREAD].source_ids  # the probe's records
    assert "verify_probe_unsteady" not in caveats


def test_the_series_drafters_step_enters_the_model_and_the_spread():
    """The drafter's plain step 12 ms over the one-token 10: d = 1.2, as in the model test above; a
    drafter point that moved x1.5 makes the whole probe unsteady."""
    found, _ = _drafted_run(probe_record(17, [10.0], [20.0], [60.0], drafter_ms=[12.0]))
    assert found[DRAFTER_STEP].value == pytest.approx(1.2)
    step = 2.0 + 12.125 * 0.25 + 0.2
    assert found[PREDICTED_SPEEDUP].value == pytest.approx(216 / (6 * 1.2 + 16 * step))
    assert found[DRAFTER_SHARE].value == pytest.approx(0.2 / step)
    assert DRAFTER_STEP not in _drafted_run(probe_record(17, [10.0], [20.0], [60.0]))[0]  # older records
    moved, caveats = _drafted_run(probe_record(17, [10.0], [20.0], [60.0], drafter_ms=[12.0, 18.0]))
    assert moved[PROBE_SPREAD].value == pytest.approx(1.5) and moved[PREDICTED_SPEEDUP].value is None
    assert "verify_probe_unsteady" in caveats


def test_a_probe_that_spread_too_far_feeds_no_prediction_and_says_so():
    found, caveats = _drafted_run(
        probe_record(17, [10.0, 14.0], [20.0, 21.0], [60.0, 61.0])
    )  # one-token x1.4
    assert found[PROBE_SPREAD].value == pytest.approx(1.4)
    assert found[PREDICTED_SPEEDUP].value is None and found[PREDICTED_SPEEDUP].shot_ids  # examined, cited
    unsteady = caveats["verify_probe_unsteady"]
    assert found[PREDICTED_SPEEDUP].figure_id in unsteady["figure_ids"] and "x1.40" in unsteady["sentence"]


def test_a_probe_beside_other_work_is_flagged():
    """Two engine threads on two cores leave none idle: 0.5 cores of other work is beyond the 0.1 margin."""
    found, caveats = _drafted_run(probe_record(17, [10.0], [20.0], [60.0], foreign_cores=0.5))
    busy = caveats["verify_probe_host_busy"]
    assert found[PREDICTED_SPEEDUP].figure_id in busy["figure_ids"] and "0.50 cores" in busy["sentence"]
    _quiet, caveats = _drafted_run(probe_record(17, [10.0], [20.0], [60.0], foreign_cores=0.05))
    assert "verify_probe_host_busy" not in caveats


def test_a_probe_that_failed_is_named():
    failed = {"not_run": None, "error": "EngineNotReady: boom", "points": []}
    found, caveats = _drafted_run(failed)
    assert PREDICTED_SPEEDUP not in found
    assert "EngineNotReady: boom" in caveats["verify_probe_not_measured"]["sentence"]


def test_the_gpu_speedup_config_probes_every_drafted_series_of_its_reference():
    """config/gpu-speedup-model.yaml's probe on the drafted series of the H100 reference run
    (results/reference/h100/speedup_model, its shots as recorded): widths 8 and 16 and each mode's
    cap + 1 (17, 49, 65) and width 4, every point of at least 4 steps within the series' context of
    2048 tokens; the widest all-accepted point runs fewer than the 48 asked."""
    config = check_config(yaml.safe_load((REPO / "config" / "gpu-speedup-model.yaml").read_text()))
    shots = pd.read_parquet(REPO / "results" / "reference" / "h100" / "speedup_model" / "shots.parquet")
    drafted = shots[shots["spec_mode"] != "none"]
    widths = {}
    for job_id, rows in drafted.groupby("job_id"):
        first = rows.iloc[0]
        job = SimpleNamespace(spec_mode=first["spec_mode"], parallel_streams=1, repeat=int(first["repeat"]))
        settings = SimpleNamespace(context_tokens=int(first["context_tokens_requested"]))
        ctx = SimpleNamespace(job=job, engine=load_engine("llama_cpp"), settings=settings)
        plan, reason = probe_plan(ctx, rows.to_dict("records"), config["bench"])
        assert reason is None, (job_id, reason)
        widths[first["spec_mode"]] = plan.widths
    assert len(drafted["job_id"].unique()) == 18
    assert widths == {mode: (4, 8, 16, cap) for mode, cap in (("ngram_simple", 17), ("ngram_map_k", 49),
                                                               ("ngram_mod", 65))}  # fmt: skip
