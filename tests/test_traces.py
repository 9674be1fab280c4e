"""Request traces (issue 17): the formats people keep requests in, refused line by line when they
are not requests, pinned like a model, expanded into one cell per request; the mix arithmetic; the
archive keeping user inputs by hash."""

import json

import pytest

from tests.pipeline import load_config
from whichshot.archive.user_inputs import redact_prompts, user_inputs
from whichshot.config import check_config, with_defaults
from whichshot.errors import ChecksumMismatch, WhichshotError
from whichshot.figures.aggregations import (
    output_weighted_mean,
    output_weighted_speedup,
    output_weighted_time_saved,
)
from whichshot.measure.grid import expand_trace_jobs, job_by_id
from whichshot.prepare.traces import load_trace
from whichshot.prepare.user_texts import pin_of
from whichshot.shots.axes import TRACE_WORKLOAD


def _trace_file(tmp_path, lines: list, name: str = "trace.jsonl") -> dict:
    path = tmp_path / name
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.write_text(text)
    return {"path": str(path), "sha256": pin_of(path), "format": "auto", "output_length": "fixed",
            "max_output_tokens": 32, "context_tokens": 4096, "models": []}  # fmt: skip


def test_jsonl_takes_prompts_and_chat_messages_with_their_limits(tmp_path):
    spec = _trace_file(tmp_path, [
        {"prompt": "Once upon a time", "max_tokens": 7},
        {"id": "q2", "messages": [{"role": "system", "content": "Be brief."},
                                  {"role": "user", "content": "Why?"}], "text_kind": "synthetic"},
    ])  # fmt: skip
    trace = load_trace("mine", spec)
    first, second = trace.requests
    assert (first.request_id, first.label, first.prompt, first.max_tokens) == (
        "r1",
        "line 1",
        "Once upon a time",
        7,
    )
    assert (second.request_id, second.label, second.text_kind) == ("r2", "q2", "synthetic")
    assert [m["role"] for m in second.messages] == ["system", "user"] and second.prompt is None
    assert trace.format == "jsonl" and trace.sha256 == spec["sha256"]


def test_sharegpt_asks_for_the_reply_to_the_last_human_turn(tmp_path):
    path = tmp_path / "chats.json"
    path.write_text(json.dumps([
        {"id": "a", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"},
                                      {"from": "human", "value": "Summarise that."},
                                      {"from": "gpt", "value": "recorded, not sent"}]},
    ]))  # fmt: skip
    (request,) = load_trace("chats", {"path": str(path), "sha256": pin_of(path)}).requests
    assert [m["content"] for m in request.messages] == ["Hi", "Hello", "Summarise that."]
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user"] and request.label == "a"


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        (['{"prompt": "ok"}', "{not json"], "line 2: not JSON"),
        (['{"prompt": "ok"}', "", '["a list"]'], "line 3: a request is a JSON object"),
        (['{"prompt": "a", "messages": []}'], "line 1: a request has either 'prompt' or 'messages'"),
        (['{"prompt": "  "}'], "line 1: 'prompt' must be non-empty text"),
        (['{"prompt": "a", "max_tokens": 0}'], "line 1: 'max_tokens' must be a positive integer"),
        (['{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}'],
         "line 1: the last message must be the user's"),
        (['{"messages": [{"role": "robot", "content": "a"}]}'], "line 1: message 1 needs a role"),
        (['{"prompt": "a", "text_kind": "fake"}'], "line 1: 'text_kind' must be real or synthetic"),
    ],
)  # fmt: skip
def test_a_bad_jsonl_line_is_refused_with_its_number(tmp_path, lines, said):
    spec = _trace_file(tmp_path, lines)
    with pytest.raises(WhichshotError, match=f"traces.mine: .*trace.jsonl {said}"):
        load_trace("mine", spec)


def test_an_empty_or_changed_or_missing_trace_is_refused(tmp_path):
    empty = _trace_file(tmp_path, ["", "   "])
    with pytest.raises(WhichshotError, match="is empty"):
        load_trace("mine", empty)
    blank_lines_only = _trace_file(tmp_path, ["", '{"prompt": "x"}'], "one.jsonl")
    (tmp_path / "one.jsonl").write_text("\n\n" + '{"prompt": "y"}\n')
    with pytest.raises(ChecksumMismatch, match="traces.mine: sha256 of .*one.jsonl"):
        load_trace("mine", blank_lines_only)
    with pytest.raises(WhichshotError, match="traces.mine: .*gone.jsonl does not exist"):
        load_trace("mine", {"path": str(tmp_path / "gone.jsonl"), "sha256": "0" * 64})
    empty_array = tmp_path / "none.json"
    empty_array.write_text("[]")
    with pytest.raises(WhichshotError, match="holds no request"):
        load_trace("mine", {"path": str(empty_array), "sha256": pin_of(empty_array)})


def _config(spec: dict, **extra) -> dict:
    return {
        "run_id": "t",
        "engines": {"e": {"kind": "llama_cpp"}},
        "models": {"m": {}, "draft": {"measure": False}},
        "prompts": {"lengths": [64]},
        "protocol": {"cold_processes": 2, "warm_shots": 4},
        "workloads": {"cold_processes": 1, "warm_shots": 3},
        "spec_modes": {"none": {}, "ngram": {"type": "ngram-mod"}},
        "traces": {"mine": spec},
        **extra,
    }


def test_each_request_is_a_cell_under_every_mode_cold_and_warm(tmp_path):
    spec = _trace_file(tmp_path, [{"prompt": "a"}, {"prompt": "b"}, {"prompt": "c"}])
    config = with_defaults(_config({"path": spec["path"], "sha256": spec["sha256"], "max_requests": 2}))
    jobs = expand_trace_jobs(config)
    # 2 requests (max_requests) x 2 modes x (cold, warm)
    assert len(jobs) == 2 * 2 * 2 and len({j.job_id for j in jobs}) == len(jobs)
    assert {(j.request_id, j.spec_mode, j.protocol) for j in jobs} == {
        (r, m, p) for r in ("r1", "r2") for m in ("none", "ngram") for p in ("cold", "warm")
    }
    assert all(j.workload == TRACE_WORKLOAD and j.trace == "mine" for j in jobs)
    assert {j.context_tokens_requested for j in jobs} == {4096}
    assert {j.series_length for j in jobs if j.protocol == "warm"} == {3}  # the workloads' lengths
    assert job_by_id(config, jobs[0].job_id) == jobs[0]


def test_the_config_refuses_a_bad_trace_before_anything_runs(tmp_path):
    def checked(trace: dict) -> None:
        config = load_config("smoke")
        config["models"]["draft"] = {**config["models"]["smollm2_135m"], "measure": False}
        check_config({**config, "traces": {"mine": trace}})

    spec = _trace_file(tmp_path, ['{"prompt": "a"}', "oops"])
    with pytest.raises(WhichshotError, match="line 2: not JSON"):
        checked({"path": spec["path"], "sha256": spec["sha256"]})
    good = _trace_file(tmp_path, ['{"prompt": "a"}'], "good.jsonl")
    with pytest.raises(WhichshotError, match="traces.mine.models: 'draft' is not a measured model"):
        checked({"path": good["path"], "sha256": good["sha256"], "models": ["draft"]})
    with pytest.raises(WhichshotError, match="traces.mine.output_length"):
        checked({"path": good["path"], "sha256": good["sha256"], "output_length": "long"})
    checked({"path": good["path"], "sha256": good["sha256"]})


def test_the_mix_weighs_each_request_by_its_decode_time():
    # Request 1: 100 tokens at 50 -> 20 tok/s (2 s -> 5 s); request 2: 300 tokens at 30 -> 60 (10 s -> 5 s).
    values = [100, 50.0, 20.0, 300, 30.0, 60.0]
    assert output_weighted_speedup(values, {}) == pytest.approx((2 + 10) / (5 + 5))
    assert output_weighted_time_saved(values, {}) == pytest.approx(12 - 10)
    assert output_weighted_mean([100, 0.9, 300, 0.1], {}) == pytest.approx((90 + 30) / 400)
    # Equal output tokens: still weighted by time, not the mean of the speed-ups (0.4x and 2x).
    assert output_weighted_speedup([100, 50.0, 20.0, 100, 30.0, 60.0], {}) == pytest.approx(
        (2 + 10 / 3) / (5 + 5 / 3)
    )


def test_the_archive_keeps_user_inputs_by_hash_unless_asked(tmp_path):
    spec = _trace_file(tmp_path, [{"prompt": "private words"}])
    config = with_defaults(_config({"path": spec["path"], "sha256": spec["sha256"]}))
    assert user_inputs(config) == [{"where": "traces.mine", "path": spec["path"], "sha256": spec["sha256"]}]
    prompts = {
        "prompts": {"64A": {"text": "pydoc text", "token_ids": [1, 2]}},
        "workloads": {"explain-real": {"text": "built-in", "token_ids": [3],
                                       "source": {"kind": "fixed_concept"}}},
        "traces": {"mine": {"requests": {"r1": {"text": "private words", "token_ids": [4, 5],
                                                "checks": {}}}}},
    }  # fmt: skip
    redacted = redact_prompts(prompts, config)
    assert "private words" not in json.dumps(redacted)
    assert redacted["traces"]["mine"]["requests"]["r1"]["token_ids_sha256"]
    assert redacted["prompts"]["64A"]["text"] == "pydoc text"  # built-in text stays
    assert redacted["workloads"]["explain-real"]["text"] == "built-in"


def test_the_shipped_example_trace_is_pinned_and_its_overlay_checks():
    import yaml

    from tests.pipeline import REPO

    overlay = yaml.safe_load((REPO / "config" / "trace-example.yaml").read_text())
    spec = overlay["traces"]["example"]
    path = REPO / spec["path"]
    assert pin_of(path) == spec["sha256"]
    trace = load_trace("example", {**spec, "path": str(path)})
    kinds = [r.text_kind for r in trace.requests]
    assert len(trace.requests) == 10 and kinds.count("synthetic") == 2
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for key, value in overlay.items():  # snakemake merges a --configfile section by section
        config[key] = {**config[key], **value} if isinstance(value, dict) and key in config else value
    config["traces"]["example"]["path"] = str(path)
    checked = check_config(config)
    assert checked["workloads"]["names"] == [] and checked["traces"]["example"]["models"] == [
        "qwen_coder_0p5b"
    ]


def test_a_jsonl_string_may_hold_unicode_line_separators(tmp_path):
    path = tmp_path / "seps.jsonl"
    path.write_text(
        json.dumps({"prompt": "one\u2028two\u0085three"}, ensure_ascii=False) + "\r\n", encoding="utf-8"
    )
    (request,) = load_trace("mine", {"path": str(path), "sha256": pin_of(path)}).requests
    assert request.prompt == "one\u2028two\u0085three"


def test_every_mode_mixes_the_same_requests_and_one_left_out_is_caveated():
    import pandas as pd

    from tests.shot_tables import cell, series
    from whichshot.figures.table import compute_figures

    def request(rid, mode, values):
        of = cell(workload="trace", trace="t", request_id=rid, spec_mode=mode, protocol="cold",
                  prompt_tokens_requested=None)  # fmt: skip
        return series(of, values, copy_fraction=0.5)

    ok = [{"decode_tok_s": 20.0, "output_tokens": 100}]
    fast = [{"decode_tok_s": 40.0, "output_tokens": 100}]
    shots = request("r1", "none", ok) + request("r2", "none", ok)
    shots += request("r1", "a", fast) + request("r2", "a", fast)
    shots += request("r1", "b", fast) + request("r2", "b", [None])  # r2 failed under b
    figures, caveats = compute_figures(pd.DataFrame(shots), [], 0.7)
    mix = {f.axes["spec_mode"]: f for f in figures if f.metric == "mix_speedup"}
    assert mix["a"].value == pytest.approx(2.0) and mix["b"].value == pytest.approx(2.0)
    assert {f.axes["request_id"] for f in figures if f.figure_id in mix["a"].input_figure_ids} == {"r1"}
    incomplete = next(c for c in caveats if c["caveat_id"] == "trace_mix_incomplete")
    assert mix["a"].figure_id in incomplete["figure_ids"] and "leaves out r2" in incomplete["sentence"]
