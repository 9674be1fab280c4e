"""Request traces end to end on the real engine (issue 17): a JSONL trace (a plain prompt, chat
messages, and one request too long for the context) and a ShareGPT file, each request under the
cold/warm protocol with and without n-gram drafting; the rows name the trace and its pin, the
long request is skipped with a caveat, and the report answers with the copy-fraction and mix
figures."""

import copy
import json

import pandas as pd
import pytest
import yaml

from tests.pipeline import load_config, run_pipeline
from whichshot.prepare.user_texts import pin_of
from whichshot.prepare.workloads import pydoc_sections
from whichshot.report.layout import TRACE_MIX

pytestmark = pytest.mark.e2e
CONTEXT = 512


def _jsonl_requests() -> list[dict]:
    (_, assert_doc), (_, pass_doc) = pydoc_sections(["assert", "pass"])
    return [
        {"id": "recall-pass", "prompt": f"{pass_doc[:600]}\n\nThe same text again, word for word:\n\n"},
        {"id": "explain", "messages": [{"role": "user", "content": "Explain what a Python list is."}],
         "max_tokens": 12},
        {"id": "too-long", "prompt": assert_doc * 4},
    ]  # fmt: skip


def _sharegpt_conversations() -> list[dict]:
    (_, del_doc), = pydoc_sections(["del"])  # fmt: skip
    return [
        {"id": "c1", "conversations": [
            {"from": "human", "value": f"Repeat this paragraph exactly:\n\n{del_doc[:500]}"},
            {"from": "gpt", "value": "(the recorded answer is not sent)"}]},
        {"id": "c2", "conversations": [
            {"from": "system", "value": "You are terse."},
            {"from": "human", "value": "What does `pass` do?"}]},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def trace_run(tmp_path_factory):
    mine = tmp_path_factory.mktemp("my-traces")
    jsonl = mine / "requests.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in _jsonl_requests()))
    sharegpt = mine / "chats.json"
    sharegpt.write_text(json.dumps(_sharegpt_conversations()))
    traces = {
        "mine": {"path": str(jsonl), "sha256": pin_of(jsonl), "max_output_tokens": 16,
                 "context_tokens": CONTEXT},
        "chats": {"path": str(sharegpt), "sha256": pin_of(sharegpt), "max_output_tokens": 16,
                  "context_tokens": CONTEXT, "output_length": "natural"},
    }  # fmt: skip
    config = load_config("smoke")
    # The decode ceilings are read (our copy-bandwidth probe); the engine-kernel probe is off: it times
    # only the prefill ceiling's peak.
    bench = {"enabled": False, "kernel_probe": {"enabled": False}}
    config.update(run_id="traces", traces=traces, bench=bench)
    config["prompts"] = {"lengths": [64]}
    config["protocol"] |= {"output_tokens": 8, "cold_processes": 1, "warm_shots": 0, "context_tokens": [512]}
    config["workloads"] = {"cold_processes": 1, "warm_shots": 2}
    config["spec_modes"] = load_config("workloads")["spec_modes"]
    workdir = tmp_path_factory.mktemp("traces-run")
    result = run_pipeline(workdir, config)
    assert result.returncode == 0, result.stderr[-4000:]
    shots = pd.read_parquet(workdir / "results" / "shots.parquet")
    figures = pd.read_parquet(workdir / "results" / "figures.parquet")
    html = (workdir / "results" / "report" / "index.html").read_text()
    return {"workdir": workdir, "traces": traces, "shots": shots, "figures": figures, "html": html,
            "config": config}  # fmt: skip


def test_every_trace_row_names_its_trace_request_and_pin(trace_run):
    shots, traces = trace_run["shots"], trace_run["traces"]
    traced = shots[shots["workload"] == "trace"]
    assert set(traced["trace"]) == {"mine", "chats"}
    for name, spec in traces.items():
        rows = traced[traced["trace"] == name]
        assert (rows["corpus_sha256"] == spec["sha256"]).all() and (rows["corpus"] == f"trace:{name}").all()
    assert set(traced.loc[traced["trace"] == "mine", "request_id"]) == {"r1", "r2", "r3"}
    assert set(traced.loc[traced["trace"] == "chats", "request_id"]) == {"r1", "r2"}
    assert shots.loc[shots["workload"] == "continue_text", "trace"].isna().all()


def test_each_request_ran_cold_and_warm_with_and_without_drafting(trace_run):
    ran = trace_run["shots"]
    ran = ran[(ran["workload"] == "trace") & (ran["status"] == "ok")]
    cells = ran.groupby(["trace", "request_id"])[["protocol", "spec_mode"]].apply(
        lambda rows: set(map(tuple, rows.to_numpy()))
    )
    everything = {(p, m) for p in ("cold", "warm") for m in ("none", "ngram_simple")}
    assert all(found == everything for found in cells), cells
    assert len(cells) == 4  # the long request never ran


def test_output_length_is_said_in_every_row_and_honoured(trace_run):
    ran = trace_run["shots"]
    ran = ran[(ran["workload"] == "trace") & (ran["status"] == "ok")]
    fixed = ran[ran["trace"] == "mine"]
    assert (fixed["output_length"] == "fixed").all()
    assert (fixed["output_tokens"] == fixed["output_tokens_requested"]).all()
    assert set(fixed["output_tokens_requested"]) == {16, 12}  # the trace's default, and r2's max_tokens
    natural = ran[ran["trace"] == "chats"]
    assert (natural["output_length"] == "natural").all()
    assert (natural["output_tokens"] <= natural["output_tokens_requested"]).all()
    assert ran["copy_fraction"].notna().all() and ran["self_repetition"].notna().all()


def test_a_request_over_the_context_is_skipped_counted_and_caveated(trace_run):
    shots, figures = trace_run["shots"], trace_run["figures"]
    skipped = shots[shots["status"] == "skipped"]
    assert set(skipped["request_id"]) == {"r3"} and set(skipped["trace"]) == {"mine"}
    assert skipped["error"].str.contains(f"> context_tokens {CONTEXT}").all()
    assert skipped["output_token_ids"].map(len).eq(0).all()
    counts = figures[figures["metric"] == "requests_skipped"].set_index(["trace", "protocol"])["value"]
    assert counts[("mine", "cold")] == 1 and counts[("chats", "cold")] == 0
    caveats = pd.read_parquet(trace_run["workdir"] / "results" / "caveats.parquet")
    assert "trace_requests_skipped" in set(caveats["caveat_id"])
    mix = figures[(figures["metric"] == "mix_speedup") & (figures["trace"] == "mine")]
    assert all("trace_requests_skipped" in list(ids) for ids in mix["caveat_ids"])
    assert "failed_shots" not in set(caveats["caveat_id"])


def test_mix_figures_recompute_from_the_request_figures(trace_run):
    figures = trace_run["figures"].set_index("figure_id")
    mix = figures[figures["metric"] == "mix_speedup"]
    assert len(mix) >= 4  # two traces x cold, warm
    for _, row in mix.iterrows():
        inputs = [figures.loc[i, "value"] for i in row["input_figure_ids"]]
        triples = [inputs[i : i + 3] for i in range(0, len(inputs), 3)]
        without = sum(out / v0 for out, v0, _ in triples)
        with_drafts = sum(out / v1 for out, _, v1 in triples)
        assert row["value"] == pytest.approx(without / with_drafts)
        assert row["kind"] == "derived" and len(row["shot_ids"]) > 0
    copy = figures[figures["metric"] == "mix_copy_fraction"]
    assert ((copy["value"] >= 0) & (copy["value"] <= 1)).all() and len(copy) >= 4


def test_the_report_answers_with_the_trace_section_and_plots(trace_run):
    html = trace_run["html"]
    assert 'id="traces"' in html and "mix speed-up" in html
    assert 'id="plot-trace_copy_fraction"' in html and 'id="plot-trace_speedup_vs_copy"' in html
    assert "<img" in html.split('id="plot-trace_copy_fraction"')[1][:200]
    mix_ids = trace_run["figures"].loc[trace_run["figures"]["metric"] == "mix_speedup", "figure_id"]
    assert all(f'data-figure-id="{i}"' in html for i in mix_ids)
    summary = (trace_run["workdir"] / "results" / "report" / "summary.md").read_text()
    assert f"## {TRACE_MIX.title}" in summary


def test_request_text_and_output_stay_out_of_the_report_by_default(trace_run):
    html = trace_run["html"]
    summary = (trace_run["workdir"] / "results" / "report" / "summary.md").read_text()
    outputs = trace_run["shots"]["output_text"].dropna()
    long_outputs = [t.strip() for t in outputs if len(t.strip()) >= 24]
    assert long_outputs
    for text in long_outputs:
        assert text[:24] not in html and text[:24] not in summary
    assert "report.show_text: false" in html
    assert "Explain what a Python list is." not in html


def test_the_archive_keeps_the_traces_by_hash_only(trace_run):
    import tarfile

    archive = trace_run["workdir"] / "results" / "archive" / "traces.tar.gz"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        inputs = json.loads(tar.extractfile("traces/inputs.json").read())
        prompts = json.loads(
            tar.extractfile("traces/results/prompts/llama_cpp/smollm2_135m.trace-mine.json").read()
        )
    assert not any("/inputs/" in name for name in names)
    assert inputs["include_inputs"] is False
    assert {i["where"]: i["sha256"] for i in inputs["inputs"]} == {
        "traces.mine": trace_run["traces"]["mine"]["sha256"],
        "traces.chats": trace_run["traces"]["chats"]["sha256"],
    }
    request = prompts["traces"]["mine"]["requests"]["r2"]
    assert "text" not in request and "token_ids" not in request and request["token_ids_sha256"]
    assert "Explain what a Python list is." not in json.dumps(prompts)


def test_a_changed_trace_is_refused_before_any_measurement(trace_run):
    config_path = trace_run["workdir"] / "config" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    jsonl = trace_run["workdir"].parent / "changed.jsonl"
    jsonl.write_text('{"prompt": "changed"}\n')
    config["traces"]["mine"]["path"] = str(jsonl)
    result = run_pipeline(trace_run["workdir"], config)
    assert result.returncode != 0
    assert "traces.mine: sha256 of" in result.stderr and "refusing to use it" in result.stderr
    assert len(pd.read_parquet(trace_run["workdir"] / "results" / "shots.parquet")) == len(trace_run["shots"])


def test_every_cell_stands_beside_its_ceiling_from_the_shipped_models_file(trace_run):
    workdir, figures = trace_run["workdir"], trace_run["figures"]
    traffic = json.loads((workdir / "results" / "traffic" / "smollm2_135m.json").read_text())
    # SmolLM2-135M: 30 layers, 3 KV heads of 64 dims, K and V in f16: 30 x 3 x 128 x 2 bytes per token
    assert traffic["kv_bytes_per_context_token"] == 30 * 3 * 128 * 2
    model = json.loads((workdir / "results" / "models" / "smollm2_135m.json").read_text())
    # Tied embeddings: every tensor is read per token, so the weights are nearly the whole file.
    assert (
        traffic["tied_embeddings"]
        and 0.95 < traffic["weight_bytes_per_token"] / model["metadata"]["file_bytes"] < 1
    )
    ceilings = figures[figures["metric"] == "decode_ceiling_tok_s"]
    assert len(ceilings) and (ceilings["kind"] == "inferred").all() and (ceilings["value"] > 0).all()
    probe = figures[figures["metric"] == "cpu_copy_bandwidth_bytes_s"]
    assert probe["kind"].tolist() == ["measured"]
    shares = figures[figures["metric"] == "decode_share_of_ceiling"]
    assert set(shares["cell_id"]) == set(ceilings["cell_id"])


def test_adding_a_trace_reruns_no_other_series(trace_run, tmp_path):
    config = copy.deepcopy(trace_run["config"])  # as measured (another test may rewrite the file)
    more = tmp_path / "more.jsonl"
    more.write_text('{"prompt": "One more request."}\n')
    config["traces"]["more"] = {"path": str(more), "sha256": pin_of(more), "max_output_tokens": 8,
                                "context_tokens": CONTEXT}  # fmt: skip
    plan = run_pipeline(trace_run["workdir"], config, "--dry-run")
    assert plan.returncode == 0, plan.stderr[-2000:]
    lines = (plan.stdout + plan.stderr).splitlines()
    series = [line.split("job=", 1)[1] for line in lines if "wildcards: job=" in line]
    assert series and all(".trace-more-" in job for job in series), series
