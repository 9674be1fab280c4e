"""Each series' plan (whichshot.measure.plan), the run_series job's only params: which settings reach
which plans. Snakemake re-measures a finished series exactly when its plan changes, so this is the
rule of docs/protocol.md's "What re-measures what" (tests/test_e2e_rerun.py checks it against
Snakemake's own plan of a finished run)."""

import copy
import hashlib
import json
from pathlib import Path

import pytest

from tests.pipeline import filled_config
from whichshot.config import check_config, with_defaults
from whichshot.engine import load_engine
from whichshot.measure.grid import all_jobs
from whichshot.measure.plan import PlanNotOfConfig, engine_of_plan, series_plan, settings_sha256
from whichshot.shots.axes import BASE_WORKLOAD

NGRAM = {"type": "ngram-simple", "options": {"spec-ngram-simple-size-n": 4, "spec-ngram-simple-size-m": 16}}


def _plans(config: dict) -> dict[str, dict]:
    return {job.job_id: series_plan(config, job) for job in all_jobs(config)}


def _base() -> dict:
    """The grid and the workloads, with and without drafting, llama-bench on."""
    config = filled_config("workloads")
    config["protocol"]["warm_shots"] = 3  # warm series of the grid: llama-bench brackets them
    config["bench"]["enabled"] = True
    return config


def _remeasured(change, config: dict | None = None) -> tuple[set[str], set[str]]:
    """(series whose plan the change alters, series it adds) of `config` (default: _base())."""
    before = config or _base()
    after = copy.deepcopy(before)
    change(after)
    old, new = _plans(before), _plans(after)
    return {job for job in old.keys() & new.keys() if old[job] != new[job]}, new.keys() - old.keys()


def _kinds(config: dict) -> dict[str, set[str]]:
    """The base config's series by what they are: grid, workload, warm grid, drafted."""
    jobs = all_jobs(config)
    return {
        "all": {j.job_id for j in jobs},
        "grid": {j.job_id for j in jobs if j.workload == BASE_WORKLOAD},
        "workload": {j.job_id for j in jobs if j.workload != BASE_WORKLOAD},
        "warm grid": {j.job_id for j in jobs if j.workload == BASE_WORKLOAD and j.protocol == "warm"},
        "drafted": {j.job_id for j in jobs if j.spec_mode != "none"},
    }


def _set(section: str, key: str, value):
    def change(config: dict) -> None:
        config[section][key] = value

    return change


@pytest.mark.parametrize(
    "change",
    [
        _set("protocol", "warm_fraction", 0.5),
        _set("protocol", "verdict_margin", 0.05),
        lambda c: c.update(claims=["claims/seed-000.yaml"]),
        _set("report", "show_text", True),
        _set("report", "compare_with", "results/reference/cpu_first_run"),
        _set("archive", "include_inputs", True),
        lambda c: c.update(run_id="another-label"),
        lambda c: c["bench"]["kernel_probe"].update(enabled=not c["bench"]["kernel_probe"]["enabled"]),
    ],
    ids=[
        "warm_fraction",
        "verdict_margin",
        "claims",
        "report.show_text",
        "report.compare_with",
        "archive",
        "run_id",
        "bench.kernel_probe",
    ],
)
def test_what_only_figures_and_the_report_read_reaches_no_plan(change):
    assert _remeasured(change) == (set(), set())


def test_the_bench_settings_reach_only_the_series_a_tool_runs_beside():
    base = _base()
    kinds = _kinds(base)
    changed, _ = _remeasured(_set("bench", "repetitions", 5), base)
    assert changed == kinds["warm grid"] | kinds["drafted"]  # brackets; verification-cost probe
    off = copy.deepcopy(base)
    off["bench"]["enabled"] = False
    assert _remeasured(_set("bench", "repetitions", 5), off) == (set(), set())
    peer = {"enabled": False, "command": None, "runs": 9, "timeout_s": 60}  # off: its settings unread
    assert _remeasured(_set("bench", "peer_client", peer), off) == (set(), set())
    changed, _ = _remeasured(_set("bench", "peer_client", {**peer, "enabled": True}), off)
    assert changed == kinds["warm grid"]  # the series the peer is set against


def test_the_verify_probe_settings_reach_the_drafted_series_alone():
    # A plan without them ran no probe in the pipeline (and an undrafted series failed reading them).
    base = _base()
    kinds, plans = _kinds(base), _plans(base)
    assert all(plans[job]["bench"]["verify_probe"]["enabled"] for job in kinds["drafted"])
    assert not any("verify_probe" in plans[job]["bench"] for job in kinds["all"] - kinds["drafted"])
    widths = lambda config: config["bench"]["verify_probe"].update(widths=[8])  # noqa: E731
    assert _remeasured(widths, base) == (kinds["drafted"], set())
    off = copy.deepcopy(base)
    off["bench"]["verify_probe"]["enabled"] = False
    assert all(_plans(off)[job]["bench"]["verify_probe"] == {"enabled": False} for job in kinds["drafted"])
    assert _remeasured(widths, off) == (set(), set())


def test_an_output_budget_re_measures_exactly_the_series_it_bounds():
    kinds = _kinds(_base())
    assert _remeasured(_set("protocol", "output_tokens", 12)) == (kinds["grid"], set())
    assert _remeasured(_set("workloads", "max_output_tokens", 300)) == (kinds["workload"], set())


def test_an_engine_setting_re_measures_every_series_of_that_engine():
    kinds = _kinds(_base())
    for key, value in (("threads", 1), ("gpu_layers", 99)):
        changed, _ = _remeasured(lambda c, k=key, v=value: c["engines"]["llama_cpp"].update({k: v}))
        assert changed == kinds["all"], key


@pytest.mark.parametrize(("key", "value"), [("port", 8089), ("ready_timeout_s", 30), ("shot_timeout_s", 60)])
def test_the_port_and_timeouts_re_measure_nothing(key, value):
    # A finished shot is what it is whatever they were: they reach the job from the config, not its plan.
    assert _remeasured(_set("server", key, value)) == (set(), set())


def test_bench_repetitions_reach_only_the_repeats_that_run_a_bench_tool():
    base = _base()
    base["protocol"]["repeats"] = 3
    base["bench"]["repeats"] = 1
    plans = _plans(base)
    benched = {job for job, plan in plans.items() if "repetitions" in plan["bench"]}
    assert benched and all(plans[job]["job"]["repeat"] == 1 for job in benched)
    later = {job for job, plan in plans.items() if plan["job"]["repeat"] > 1 and "repeats" in plan["bench"]}
    assert later  # they know why they run no tool, and nothing of how it would run
    assert _remeasured(_set("bench", "repetitions", 9), base) == (benched, set())


def test_a_new_spec_mode_adds_its_series_and_alters_no_other():
    changed, added = _remeasured(lambda c: c["spec_modes"].update(ngram_wide={**NGRAM, "type": "ngram-mod"}))
    assert changed == set() and added and all(".ngram_wide." in job for job in added)


def test_a_new_engine_or_prompt_length_adds_its_series_and_alters_no_other():
    def another_engine(config: dict) -> None:
        config["engines"]["llama_cpp_one_thread"] = {**config["engines"]["llama_cpp"], "threads": 1}

    changed, added = _remeasured(another_engine)
    assert changed == set() and added and all(job.startswith("llama_cpp_one_thread.") for job in added)
    changed, added = _remeasured(_set("prompts", "lengths", [64, 128]))
    assert changed == set() and added and all(".p128." in job for job in added)


def test_a_compile_cache_adds_its_cold_series_and_a_vllm_setting_re_measures_that_engines():
    """The compile_cache axis (protocol.compile_caches) reaches a plan through its job: a cache
    asked for adds the cold series of the kind that has one; the vllm engine's own settings reach
    its series, and only those."""
    config = filled_config("vllm")
    kinds = _kinds(config)
    caches = ["engine_default", "empty"]
    changed, added = _remeasured(lambda c: c["protocol"].update(compile_caches=caches), config)
    assert changed == set() and added
    assert all(".cold." in job and job.endswith(".cc-empty.rep1") for job in added)
    changed, added = _remeasured(lambda c: c["engines"]["vllm"].update(kv_cache_gib=2), config)
    assert added == set() and changed == {job for job in kinds["all"] if job.startswith("vllm.")} != set()


def test_a_block_for_another_engine_kind_leaves_this_kinds_series_alone():
    """A mode runs on each engine kind with its own settings: adding a transformers engine with
    its block in the mode re-measures no llama.cpp series."""
    base = _base()
    base["spec_modes"]["ngram_simple"] = {"llama_cpp": NGRAM}
    lookup = {"prompt_lookup_num_tokens": 10}
    changed, _ = _remeasured(lambda c: c["spec_modes"]["ngram_simple"].update(transformers=lookup), base)
    assert changed == set()


def test_a_plan_holds_the_kind_settings_and_the_draft_model_it_drafts_with():
    config = _base()
    draft = "smollm2_135m"
    config["spec_modes"] = {
        "none": {},
        "draft": {"llama_cpp": {"type": "draft-simple"}, "draft_model": draft},
        "copy": {"llama_cpp": NGRAM, "draft_model": draft},
    }
    plans = [series_plan(config, job) for job in all_jobs(config)]
    modes = {plan["job"]["spec_mode"]: plan["spec_mode"] for plan in plans}
    assert modes["draft"] == {"settings": {"type": "draft-simple"}, "draft_model": draft}
    assert modes["copy"] == {"settings": NGRAM, "draft_model": None}  # n-gram drafts need no model
    assert modes["none"] == {"settings": {}, "draft_model": None}
    assert {plan["log_dir"] for plan in plans} == {f"logs/engines/{job.job_id}" for job in all_jobs(config)}


def test_the_order_of_the_configs_keys_changes_no_plan():
    config = _base()
    reordered = json.loads(json.dumps(config, sort_keys=True))
    reordered["engines"]["llama_cpp"] = dict(reversed(list(config["engines"]["llama_cpp"].items())))

    def reprs(plans: dict) -> dict:
        return {job: repr(plan) for job, plan in plans.items()}  # Snakemake compares the params' repr

    assert reprs(_plans(config)) == reprs(_plans(reordered))


# -- settings hashed before redaction (issue 51) ----------------------------------------------------


def _openai_plan(argv_tail: list[str], **given) -> dict:
    config = filled_config("smoke")
    argv = ["llama-server", "--host", "{host}", "--port", "{port}", "-m", "{model}", *argv_tail]
    config["engines"] = {"srv": {**config["engines"]["llama_cpp"], "kind": "openai", "argv": argv, **given}}
    config["engines"]["srv"] = {k: v for k, v in config["engines"]["srv"].items()
                                if k in ("kind", "argv", "threads", "env")}  # fmt: skip
    config = check_config(config)
    job = next(job for job in all_jobs(config) if job.protocol == "warm")
    return series_plan(config, job), config


def test_a_batching_flag_is_a_setting_not_a_secret():
    plans = {size: _openai_plan(["--max-num-batched-tokens", size])[0] for size in ("512", "8192")}
    assert plans["512"]["engine"]["argv"][-2:] == ["--max-num-batched-tokens", "512"]  # in clear
    assert settings_sha256(plans["512"]) != settings_sha256(plans["8192"])
    spec = {"kind": "openai", "argv": ["python3", "--max-num-batched-tokens", "512"], "threads": 2}
    spec = with_defaults({"engines": {"srv": spec}})["engines"]["srv"]
    builds = [load_engine("openai").build({**spec, "argv": ["python3", "--max-num-batched-tokens", size]},
                                          Path("/tmp"), 1) for size in ("512", "8192")]  # fmt: skip
    assert builds[0]["server"]["argv"] == ["python3", "--max-num-batched-tokens", "512"]
    assert builds[0]["build_id"] != builds[1]["build_id"]


def test_a_secret_is_hashed_keyed_and_never_in_the_plan():
    (plan_a, config_a), (plan_b, _) = (_openai_plan(["--api-key", key]) for key in ("sk-aaaa", "sk-bbbb"))
    assert "sk-aaaa" not in json.dumps(plan_a) and "sk-bbbb" not in json.dumps(plan_b)
    digest = plan_a["engine"]["argv"][-1]
    assert digest.startswith("hmac-sha256:") and digest != plan_b["engine"]["argv"][-1]
    assert digest != "hmac-sha256:" + hashlib.sha256(b"sk-aaaa").hexdigest()  # keyed, not a plain hash
    assert settings_sha256(plan_a) != settings_sha256(plan_b)
    assert engine_of_plan(plan_a, config_a)["argv"][-1] == "sk-aaaa"  # the job gets it from the config
    with pytest.raises(PlanNotOfConfig, match=r"^engines\.srv in the config differs"):
        engine_of_plan(plan_b, config_a)
