import copy
from pathlib import Path

import pytest
import yaml

from tests.pipeline import load_config
from whichshot.config import check_config, with_defaults
from whichshot.errors import WhichshotError
from whichshot.measure.grid import expand_jobs, expand_workload_jobs, job_by_id


def _config(**protocol):
    return with_defaults(
        {
            "engines": {"e1": {"kind": "llama_cpp"}},
            "models": {"m1": {}, "m2": {}},
            "prompts": {"lengths": [128, 512]},
            "protocol": {"cold_processes": 3, "warm_shots": 6, "rests_s": [0, 3], "repeats": 2, **protocol},
        }
    )


def test_grid_is_the_full_product():
    jobs = expand_jobs(_config())
    # 1 engine x 2 models x 2 lengths x (cold + 2 warm rests) x 2 repeats
    assert len(jobs) == 1 * 2 * 2 * 3 * 2
    assert len({j.job_id for j in jobs}) == len(jobs)


def test_controls_are_axes():
    config = _config(repeats=1, orders=["same", "reverse"], context_tokens=[4096, 16384],
                     precondition_s=[0, 30])  # fmt: skip
    jobs = expand_jobs(config)
    # per model and length: (cold + 2 rests x 2 warm-ups) x 2 contexts x 2 orders
    assert len(jobs) == 2 * 2 * (1 + 2 * 2) * 2 * 2
    assert {j.precondition_s for j in jobs if j.protocol == "cold"} == {0.0}
    assert {j.context_tokens_requested for j in jobs} == {4096, 16384}


def test_cold_and_warm_series_shapes():
    config = _config(repeats=1)
    cold = job_by_id(config, "e1.m1.p128.cold.ctx4096.same.rep1")
    warm = job_by_id(config, "e1.m1.p128.warm-rest3s-pre0s.ctx4096.same.rep1")
    assert cold.series_length == 3 and all(cold.fresh_process_before(i) for i in (1, 2, 3))
    assert warm.series_length == 6 and warm.rest_s == 3.0
    assert warm.fresh_process_before(1) and not warm.fresh_process_before(2)
    assert warm.series_label == "e1.m1.p128.warm-rest3s-pre0s.ctx4096.same"


def test_prompt_order_reversal():
    config = _config(repeats=1, orders=["forward", "reverse"])
    forward = job_by_id(config, "e1.m1.p128.warm-rest0s-pre0s.ctx4096.forward.rep1")
    reverse = job_by_id(config, "e1.m1.p128.warm-rest0s-pre0s.ctx4096.reverse.rep1")
    assert [forward.prompt_variant(i) for i in range(1, 5)] == ["A", "B", "A", "B"]
    assert [reverse.prompt_variant(i) for i in range(1, 5)] == ["B", "A", "B", "A"]


def test_protocol_switched_off_drops_its_jobs():
    assert all(j.protocol == "warm" for j in expand_jobs(_config(cold_processes=0)))


def _workload_config(**workloads):
    return with_defaults(
        {
            "engines": {"e": {"kind": "llama_cpp"}},
            "models": {"big": {}, "small": {}, "draft": {"measure": False}},
            "prompts": {"lengths": [128]},
            "protocol": {"cold_processes": 3, "warm_shots": 6, "rests_s": [0, 15]},
            "workloads": {"names": ["verbatim_recall", "explain"], "text_kinds": ["real"], **workloads},
            "spec_modes": {"none": {}, "ngram": {"type": "ngram-mod"}},
        }
    )


def test_workload_series_take_their_own_lengths_and_models():
    jobs = expand_workload_jobs(_workload_config(models=["small"], cold_processes=1, warm_shots=3))
    assert {job.model for job in jobs} == {"small"}
    assert {(job.protocol, job.series_length) for job in jobs} == {("cold", 1), ("warm", 3)}
    assert len(jobs) == 2 * 2 * 2  # workloads x modes x {cold, warm at the first rest}
    assert {job.rest_s for job in jobs} == {0.0}


def test_workload_series_default_to_the_protocol_and_every_measured_model():
    jobs = expand_workload_jobs(_workload_config())
    assert {job.model for job in jobs} == {"big", "small"}
    assert {(job.protocol, job.series_length) for job in jobs} == {("cold", 3), ("warm", 6)}


def test_workload_model_must_be_measured():
    config = yaml.safe_load((Path(__file__).parent.parent / "config" / "config.yaml").read_text())
    config = copy.deepcopy(config)
    config["workloads"]["models"] = ["nope"]
    with pytest.raises(WhichshotError, match="workloads.models: 'nope' is not a measured model"):
        check_config(config)


def test_protocol_models_choose_who_runs_the_grid():
    config = _workload_config()
    config["protocol"]["models"] = ["small"]
    assert {job.model for job in expand_jobs(config)} == {"small"}
    assert {job.model for job in expand_workload_jobs(config)} == {"big", "small"}
    shipped = yaml.safe_load((Path(__file__).parent.parent / "config" / "config.yaml").read_text())
    shipped["protocol"]["models"] = ["qwen_coder_0p5b", "nope"]
    with pytest.raises(WhichshotError, match="protocol.models: 'nope' is not a measured model"):
        check_config(shipped)


def test_a_workload_returned_whole_needs_an_output_budget_that_holds_it():
    shipped = yaml.safe_load((Path(__file__).parent.parent / "config" / "config.yaml").read_text())
    shipped["workloads"]["max_output_tokens"] = shipped["workloads"]["document_tokens"]
    with pytest.raises(WhichshotError, match="max_output_tokens: .* cannot hold edit_file, verbatim_recall"):
        check_config(shipped)
    shipped["workloads"]["names"] = ["needle", "new_code", "explain"]  # nothing comes back whole
    check_config(shipped)


def test_engine_warmup_is_an_axis_of_every_series():
    jobs = expand_jobs(_config(repeats=1, engine_warmup=["engine_default", "off"]))
    assert {j.engine_warmup for j in jobs} == {"engine_default", "off"}
    assert len(jobs) == 2 * 2 * 3 * 2  # models x lengths x (cold + 2 rests) x warm-ups
    off = [j.job_id for j in jobs if j.engine_warmup == "off"]
    assert all(".warmup-off." in i for i in off) and len(set(off)) == len(off)
    assert "e1.m1.p128.cold.ctx4096.same.rep1" in {j.job_id for j in jobs}  # the default id is unchanged


def test_load_axes_multiply_the_protocol_grid_and_keep_default_ids():
    """Prefill chunk and parallel streams are axes of the protocol grid; at their defaults a series
    keeps the id it had before the axes existed (so older runs resume), elsewhere its id says them."""
    before = {j.job_id for j in expand_jobs(_config(repeats=1))}
    config = _config(repeats=1, prefill_chunk_tokens=[512, 2048], parallel_streams=[1, 2])
    jobs = expand_jobs(config)
    assert len(jobs) == 4 * len(before)
    defaults = {j.job_id for j in jobs if j.prefill_chunk_tokens == 512 and j.parallel_streams == 1}
    assert defaults == before
    other = next(j for j in jobs if j.prefill_chunk_tokens == 2048 and j.parallel_streams == 2)
    assert ".ub2048.np2." in other.job_id and job_by_id(config, other.job_id) == other
    # the workloads keep the engine's defaults: the load axes belong to the protocol grid
    workloads = expand_workload_jobs(with_defaults({**config, "workloads": {"names": ["explain"]}}))
    assert {(j.prefill_chunk_tokens, j.parallel_streams) for j in workloads} == {(512, 1)}


def test_streams_that_leave_a_slot_too_small_are_refused():
    config = load_config("smoke")  # prompts of up to 200 tokens, 16 output tokens
    config["protocol"].update(parallel_streams=[1, 4], context_tokens=[512])
    with pytest.raises(WhichshotError, match=r"4 streams leave each 128 tokens .* \(216\)"):
        check_config(config)
    config["protocol"]["parallel_streams"] = [1, 2]
    check_config(config)


def test_an_engine_kind_without_the_setting_refuses_a_load_axis():
    config = load_config("smoke")
    config["engines"]["hf"] = {
        "kind": "transformers",
        "versions": {"torch": "2.13.0", "transformers": "5.24.0"},
    }
    config["protocol"]["prefill_chunk_tokens"] = [1024]
    with pytest.raises(WhichshotError, match="prefill_chunk_tokens: engine hf .*runs only 512"):
        check_config(config)
    del config["engines"]["hf"]
    check_config(config)
