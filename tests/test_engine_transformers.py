"""The transformers engine for real: llama.cpp and transformers on the same GGUF file, workloads and
protocol in one snakemake run (hf_server in its own processes, SmolLM2-135M on the CPU)."""

import json

import pandas as pd
import pytest

from tests.divergence_kit import check_probed_entries, probe_parted_output
from tests.pipeline import load_config, run_pipeline
from whichshot.cache import cache_root
from whichshot.engine import load_engine
from whichshot.errors import WhichshotError

pytest.importorskip("torch", reason="the [transformers] extra is not installed")
pytest.importorskip("transformers", reason="the [transformers] extra is not installed")

TRANSFORMERS = {"kind": "transformers", "device": "cpu", "dtype": "float32", "threads": 2,
                "versions": {"torch": "2.13.0", "transformers": "5.24.0"}}  # fmt: skip


def cross_config() -> dict:
    """smoke's llama.cpp and model, plus transformers; one workload with a mode per engine kind."""
    config = load_config("smoke")
    config["run_id"] = "cross-engine-test"
    config["engines"]["transformers"] = TRANSFORMERS
    config["prompts"] = {"lengths": [64]}
    # Both engines warm up once before ready: their cold shots are the same first request.
    config["protocol"] |= {"output_tokens": 8, "cold_processes": 1, "warm_shots": 0, "context_tokens": [512],
                           "engine_warmup": ["on"]}  # fmt: skip
    config["workloads"] = {"names": ["verbatim_recall"], "text_kinds": ["real"], "document_tokens": 128,
                           "max_output_tokens": 160, "context_tokens": 768, "cold_processes": 1}  # fmt: skip
    config["spec_modes"] = {
        "none": {},
        "ngram_simple": {"llama_cpp": {"type": "ngram-simple"}},
        "prompt_lookup": {"transformers": {"prompt_lookup_num_tokens": 10, "max_matching_ngram_size": 2}},
    }
    config["server"] = {"ready_timeout_s": 600}
    config["bench"] = {"enabled": False, "kernel_probe": {"enabled": False}}  # no test reads the ceilings
    return config


@pytest.fixture(scope="module")
def cross_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("cross")
    result = run_pipeline(workdir, cross_config())
    assert result.returncode == 0, result.stderr[-4000:]
    shots = pd.read_parquet(workdir / "results" / "shots.parquet")
    figures = pd.read_parquet(workdir / "results" / "figures.parquet")
    caveats = pd.read_parquet(workdir / "results" / "caveats.parquet")
    return {"workdir": workdir, "shots": shots, "figures": figures, "caveats": caveats}


@pytest.fixture(scope="module")
def transformers_probe(cross_run, tmp_path_factory):
    """The divergence probe in the run's undrafted transformers configuration, its own output parted
    at PARTS_AT (its prompt_lookup outputs are identical: the pipeline's own probe asked nothing)."""
    log_dir = tmp_path_factory.mktemp("probe")
    return probe_parted_output(cross_run["workdir"], cross_config(), "transformers", log_dir)


@pytest.mark.e2e
def test_every_shot_of_both_engines_succeeds(cross_run):
    shots = cross_run["shots"]
    assert set(shots["engine"]) == {"llama_cpp", "transformers"}
    assert (shots["status"] == "ok").all(), shots.loc[shots["status"] != "ok", "error"].tolist()
    speed = shots[shots["workload"] == "continue_text"]
    assert (speed["output_tokens"] == 8).all()  # a fixed length on both engines (EOS ignored)


@pytest.mark.e2e
def test_transformers_cold_shots_are_shot_one_of_fresh_processes(cross_run):
    shots = cross_run["shots"]
    cold = shots[(shots["engine"] == "transformers") & (shots["protocol"] == "cold")]
    assert (cold["shot_index"] == 1).all()
    assert cold["process_id"].is_unique and cold["pid"].is_unique
    assert (cold["process_ready_s"] > 0).all()  # load time recorded apart, never inside a shot


@pytest.mark.e2e
def test_transformers_reports_its_own_timings_and_dtype(cross_run):
    shots = cross_run["shots"]
    hf = shots[shots["engine"] == "transformers"]
    assert (hf["engine_dtype"] == "float32").all()
    assert hf["engine_decode_tok_s"].notna().all() and hf["engine_prompt_ms"].notna().all()
    assert (hf["engine_prompt_tokens"] == hf["prompt_tokens"]).all()
    build = json.loads((cross_run["workdir"] / "results/engines/transformers/build.json").read_text())
    assert build["identity"]["torch"].startswith("2.13.0") and build["identity"]["device"] == "cpu"


@pytest.mark.e2e
def test_transformers_serves_dense_dequantised_weights_where_asked(cross_run):
    # transformers >= 5.2x would keep GGUF blocks packed; hf_server asks for dense weights, checks
    # where they are and prints it: every process of the run must say dense float32 on the CPU.
    logs = [p.read_text() for p in cross_run["workdir"].rglob("process*.log")]
    loaded = [line for log in logs for line in log.splitlines() if line.startswith("hf_server: loaded")]
    hf_jobs = cross_run["shots"].loc[cross_run["shots"]["engine"] == "transformers", "process_id"]
    assert len(loaded) == hf_jobs.nunique()
    placement = "weights {'devices': ['cpu'], 'dtypes': ['torch.float32'], 'packed_modules': 0}"
    assert all(line.endswith(placement) for line in loaded), loaded


@pytest.mark.e2e
def test_modes_run_only_on_their_engine_kind(cross_run):
    shots = cross_run["shots"]
    modes = shots[shots["workload"] != "continue_text"].groupby("engine")["spec_mode"].unique()
    assert set(modes["llama_cpp"]) == {"none", "ngram_simple"}
    assert set(modes["transformers"]) == {"none", "prompt_lookup"}


@pytest.mark.e2e
def test_prompt_lookup_counts_drafts_and_is_checked_against_no_draft(cross_run):
    shots = cross_run["shots"]
    lookup = shots[shots["spec_mode"] == "prompt_lookup"]
    assert (lookup["engine_draft_tokens"] >= lookup["engine_draft_accepted"]).all()
    drafted = lookup[lookup["engine_draft_tokens"] > 0]
    assert (drafted["engine_draft_mean_len"] >= 1).all()  # tokens per step that had a draft
    assert lookup["lossless_vs_none"].notna().all()  # measured against transformers' own none shot
    # greedy prompt lookup verifies every drafted token with the target model: token-identical
    assert lookup["lossless_vs_none"].all(), lookup["first_divergence_token"].tolist()


@pytest.mark.e2e
def test_side_by_side_figures_and_cross_engine_caveats(cross_run):
    figures, caveats = cross_run["figures"], cross_run["caveats"]
    ratios = figures[figures["metric"] == "xengine_decode_ratio"]
    assert not ratios.empty and (ratios["value"] > 0).all()
    assert set(ratios["engine"]) == {"transformers"}  # each other engine against the first, llama_cpp
    by_id = figures.set_index("figure_id")
    for row in ratios.to_dict("records"):  # arithmetic on the two cells' own decode figures
        inputs = by_id.loc[list(row["input_figure_ids"])]
        assert list(inputs["engine"]) == ["transformers", "llama_cpp"]
        assert (inputs["metric"] == "decode_tok_s").all()
        assert row["value"] == pytest.approx(inputs["value"].iloc[0] / inputs["value"].iloc[1])
    fired = set(caveats["caveat_id"])
    assert {"cross_engine_kernels", "dequantised_weights", "spec_mode_engine_specific"} <= fired
    # engine_warmup on: each engine's processes decoded once before ready, so the cold shots compare
    shots = cross_run["shots"]
    assert set(shots["engine_warmup"]) == {"on"} and set(shots["engine_warmup_run"]) == {
        "one decode before ready"
    }
    assert "engine_warmup_differs" not in fired
    logs = cross_run["workdir"] / "logs" / "engines"
    assert any("warmed up with one decode" in p.read_text() for p in logs.rglob("*.log"))


@pytest.mark.e2e
def test_report_has_the_engines_side_by_side_table(cross_run):
    report = cross_run["workdir"] / "results" / "report"
    html = (report / "index.html").read_text()
    table = html.split('<h2 id="engines">')[1].split("</table>")[0]
    side = cross_run["figures"][cross_run["figures"]["metric"].str.startswith("xengine_")]
    assert all(f'data-figure-id="{fid}"' in table for fid in side["figure_id"])
    summary = (report / "summary.md").read_text()
    assert "## Engines side by side" in summary and "transformers: decode (tok/s)" in summary


@pytest.mark.e2e
def test_the_divergence_probe_reads_the_targets_own_candidates_both_ways(transformers_probe):
    # float32 on the CPU: one forward over prompt and prefix moves a gap by rounding alone
    check_probed_entries(*transformers_probe, spread_below=1e-3)


def test_build_refuses_versions_other_than_the_pins():
    spec = {**TRANSFORMERS, "versions": {"torch": "2.13.0", "transformers": "4.0.0"}}
    with pytest.raises(
        WhichshotError, match=r"transformers 5\.24\.0 is installed but the config pins 4\.0\.0"
    ):
        load_engine("transformers").build(spec, cache_root(""), 1)


def test_weight_placement_sees_packed_modules_and_mixed_dtypes():
    import torch

    from engines.hf_server import weight_placement

    class GgufLinear(torch.nn.Linear):  # the name transformers gives a module holding GGUF blocks
        pass

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), GgufLinear(2, 2).to(torch.bfloat16))
    assert weight_placement(model) == {
        "devices": ["cpu"], "dtypes": ["torch.bfloat16", "torch.float32"], "packed_modules": 1,
    }  # fmt: skip
