"""Engine kinds in config: each kind's own keys, modes per kind, and the grid skipping what does not apply."""

import copy

import pytest

from tests.pipeline import load_config
from whichshot.config import check_config, with_defaults
from whichshot.errors import WhichshotError
from whichshot.measure.grid import expand_workload_jobs

TRANSFORMERS = {"kind": "transformers", "versions": {"torch": "2.13.0", "transformers": "5.24.0"}}
OPENAI = {"kind": "openai", "argv": ["llama-server", "--host", "{host}", "--port", "{port}", "-m", "{model}"]}


def config_with(**engines) -> dict:
    config = load_config("smoke")
    config["engines"].update(copy.deepcopy(engines))
    config["workloads"] = {"names": ["explain"], "text_kinds": ["real"], "cold_processes": 1, "warm_shots": 0}
    config["spec_modes"] = {
        "none": {},
        "ngram": {"llama_cpp": {"type": "ngram-simple"}},
        "lookup": {"transformers": {"prompt_lookup_num_tokens": 8}},
    }
    return config


def refusal(config: dict) -> str:
    with pytest.raises(WhichshotError) as caught:
        check_config(config)
    return str(caught.value)


def test_every_kind_with_its_own_keys_is_accepted():
    check_config(config_with(transformers=TRANSFORMERS, server=OPENAI))


def test_a_kind_missing_its_own_key_is_named():
    assert refusal(config_with(hf={"kind": "transformers"})) == (
        "invalid config: engines.hf: 'versions' is a required property"
    )
    assert "engines.srv" in refusal(config_with(srv={"kind": "openai"}))


def test_a_key_of_another_kind_is_refused():
    bad = {**TRANSFORMERS, "source": {}}
    assert refusal(config_with(hf=bad)).startswith("invalid config: engines.hf: unknown key")


def test_an_openai_server_must_bind_loopback():
    public = {**OPENAI, "argv": ["vllm", "serve", "m", "--host", "0.0.0.0", "--port", "{port}"]}
    assert refusal(config_with(srv=public)) == (
        "invalid config: engines.srv.argv: the server must bind 127.0.0.1: "
        "name {host} or 127.0.0.1 in argv or env"
    )


def test_a_mode_for_no_engine_of_the_config_is_refused():
    config = config_with()  # llama.cpp only, but the lookup mode is transformers'
    assert refusal(config) == (
        "invalid config: spec_modes.lookup: has settings for no engine kind of this config (llama_cpp)"
    )


def test_transformers_mode_is_prompt_lookup_or_assistant():
    config = config_with(hf=TRANSFORMERS)
    config["spec_modes"]["lookup"]["transformers"] = {"max_matching_ngram_size": 2}
    assert "give exactly one of prompt_lookup_num_tokens or assistant_model" in refusal(config)
    config["spec_modes"]["lookup"]["transformers"] = {"assistant_model": True}
    assert refusal(config) == (
        "invalid config: spec_modes.lookup: its transformers settings draft with a model: give draft_model"
    )


def test_grid_skips_modes_an_engine_kind_has_no_settings_for():
    jobs = expand_workload_jobs(with_defaults(config_with(hf=TRANSFORMERS)))
    modes = {(job.engine, job.spec_mode) for job in jobs}
    assert modes == {("llama_cpp", "none"), ("llama_cpp", "ngram"), ("hf", "none"), ("hf", "lookup")}


def test_older_top_level_llama_mode_still_applies_to_llama_cpp_only():
    config = config_with(hf=TRANSFORMERS)
    config["spec_modes"]["ngram"] = {"type": "ngram-simple"}
    modes = {(job.engine, job.spec_mode) for job in expand_workload_jobs(with_defaults(config))}
    assert ("llama_cpp", "ngram") in modes and ("hf", "ngram") not in modes


def test_an_openai_server_cannot_promise_a_warm_up():
    config = config_with(server=OPENAI)
    config["spec_modes"].pop("lookup")
    config["protocol"]["engine_warmup"] = ["off"]
    assert refusal(config) == (
        "invalid config: protocol.engine_warmup: engine server (openai) cannot promise warm-up 'off'; it "
        "offers engine_default"
    )


def test_a_mode_may_combine_types_and_says_its_draft_cap_and_verify_width():
    """seed 002's combination: several --spec-type values in one flag; the cap per step is the
    largest over the types (an option given, else llama.cpp's default) and the target verifies one
    position more than that."""
    from engines.llama_cpp import ENGINE, speculative_args

    mode = {
        "type": ["draft-simple", "ngram-simple"],
        "options": {"spec-draft-n-max": 7, "spec-ngram-simple-size-m": 15},
    }
    assert speculative_args(mode)[:2] == ["--spec-type", "draft-simple,ngram-simple"]
    limits = ENGINE.draft_limits(mode)
    assert limits["spec_types"] == "draft-simple,ngram-simple"
    assert (limits["spec_draft_cap_tokens"], limits["spec_verify_width"]) == (15, 16)
    assert ENGINE.draft_limits({"type": "ngram-mod"})["spec_draft_cap_tokens"] == 64  # common.h's n_max
    assert ENGINE.uses_draft_model(mode) and not ENGINE.uses_draft_model({"type": ["ngram-mod"]})
    config = config_with()
    config["spec_modes"]["odd"] = {"llama_cpp": {"type": ["ngram-simple", "medusa"]}}
    assert "spec_modes.odd.llama_cpp.type" in refusal(config)
