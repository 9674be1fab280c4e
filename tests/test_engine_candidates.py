"""The divergence probe's question to each engine kind (whichshot.engine.candidates), and vLLM's answer
read from its documented response (engines/vllm_candidates.py): by hand from vLLM 0.32.0's response
models, and (e2e) as vLLM's own code writes it. The transformers engine answers for real in
tests/test_engine_transformers.py, llama.cpp in tests/test_e2e_divergence.py."""

import json
import subprocess
from pathlib import Path

import pytest

from engines import vllm_candidates, vllm_venv
from engines.vllm_candidates import candidates_payload, logprobs_mode, parse_candidates
from tests.pipeline import filled_config
from whichshot.cache import cache_root
from whichshot.engine import load_engine
from whichshot.engine.candidates import probe_request
from whichshot.engine.sse import MalformedStream
from whichshot.hashing import short_id
from whichshot.measure.divergence_probe import TOP_N
from whichshot.shots.divergence import CHANGED, NEAR_TIE, classify

PROMPT, PREFIX = [11, 12, 13], [21, 22]
# Three generated positions, each the sampled token first (rank 1 under greedy decoding) then the
# others by rank, as vLLM's sampler hands them over.
STEPS = [
    [[21, -0.1, 1], [5, -2.5, 2], [6, -3.0, 3]],
    [[22, -0.2, 1], [7, -1.9, 2], [8, -4.0, 3]],
    [[861, -0.70, 1], [2651, -0.72, 2], [9, -3.5, 3]],
]
GENERATED = [21, 22, 861]


def documented_response(steps: list, generated: list[int]) -> dict:
    """A /v1/completions response of vLLM 0.32.0 to the probe's body, field by field as its
    CompletionResponse, CompletionResponseChoice and CompletionLogProbs define them and
    _create_completion_logprobs fills them with return_tokens_as_token_ids."""
    return {
        "id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
        "choices": [{
            "index": 0, "text": "abc", "finish_reason": "length", "stop_reason": None,
            "token_ids": generated, "prompt_token_ids": PROMPT, "prompt_logprobs": None,
            "logprobs": {
                "text_offset": list(range(len(generated))),
                "token_logprobs": [step[0][1] for step in steps],
                "tokens": [f"token_id:{token}" for token in generated],
                "top_logprobs": [{f"token_id:{t}": lp for t, lp, _rank in step} for step in steps],
            },
        }],
        "usage": {"prompt_tokens": 3, "completion_tokens": len(generated),
                  "total_tokens": 3 + len(generated)},
    }  # fmt: skip


def test_one_token_decodes_the_prefix_and_batched_sends_it_with_the_prompt():
    assert probe_request(PROMPT, PREFIX, batched=False) == (PROMPT, 3)
    assert probe_request(PROMPT, PREFIX, batched=True) == ([11, 12, 13, 21, 22], 1)
    assert probe_request(PROMPT, [], batched=False) == (PROMPT, 1)  # divergence at the first token


def test_every_kind_that_reports_candidates_says_so():
    for kind in ("llama_cpp", "vllm", "transformers"):
        assert load_engine(kind).reports_top_candidates, kind
    assert not getattr(load_engine("openai"), "reports_top_candidates", False)


def test_vllms_body_asks_greedy_candidates_by_id_for_each_path():
    one, batch = (candidates_payload(PROMPT, PREFIX, batched, 10) for batched in (False, True))
    assert (one["prompt"], one["max_tokens"]) == (PROMPT, 3)
    assert (batch["prompt"], batch["max_tokens"]) == (PROMPT + PREFIX, 1)
    for body in (one, batch):
        assert body["logprobs"] == 10 and body["temperature"] == 0 and body["ignore_eos"]
        assert body["return_tokens_as_token_ids"] and body["return_token_ids"] and not body["stream"]


def test_vllms_answer_is_the_last_positions_candidates_by_id():
    answer = parse_candidates(documented_response(STEPS, GENERATED))
    assert answer == {"top": {861: -0.70, 2651: -0.72, 9: -3.5}, "decoded": [21, 22]}
    entry = {"undrafted_token": 861, "drafted_token": 2651,
             "one_token": [[t, lp] for t, lp in answer["top"].items()],
             "batched": [[861, -0.69], [2651, -0.72], [9, -3.5]]}  # fmt: skip
    assert classify(entry, threshold=0.05) == NEAR_TIE  # the outcomes work on vLLM's answer unchanged
    assert classify(entry, threshold=0.01) == CHANGED


def test_vllms_answer_without_ids_or_with_a_position_missing_is_refused():
    by_text = documented_response(STEPS, GENERATED)
    choice = by_text["choices"][0]
    choice["logprobs"]["top_logprobs"][-1] = {"Hello": -0.7, " world": -0.72}  # ids not asked for
    with pytest.raises(MalformedStream, match="return_tokens_as_token_ids"):
        parse_candidates(by_text)
    short = documented_response(STEPS[:2], GENERATED)  # three ids, two positions of candidates
    with pytest.raises(MalformedStream, match="not one per generated token"):
        parse_candidates(short)
    no_ids = documented_response(STEPS, GENERATED)
    no_ids["choices"][0]["token_ids"] = None
    with pytest.raises(MalformedStream, match="return_token_ids"):
        parse_candidates(no_ids)
    empty = documented_response(STEPS, GENERATED)
    empty["choices"][0]["logprobs"]["top_logprobs"][-1] = None
    with pytest.raises(MalformedStream, match="no top candidates"):
        parse_candidates(empty)


def test_a_server_whose_logprobs_are_not_the_raw_ones_is_not_asked():
    assert logprobs_mode(["python", "-m", "x", "--port", "1"]) == vllm_candidates.RAW_ONLY
    assert logprobs_mode(["--logprobs-mode", "processed_logprobs"]) == "processed_logprobs"
    assert logprobs_mode(["--logprobs-mode=raw_logits", "--logprobs-mode", "raw_logprobs"]) == "raw_logprobs"


def vllm_python() -> Path:
    """The cached venv of tests/configs/vllm.yaml's vLLM (skip where it was never built here)."""
    spec = filled_config("vllm")["engines"]["vllm"]
    home = cache_root("") / "engines" / f"vllm-{short_id(vllm_venv.install_spec(spec))}"
    build = vllm_venv.cached_build(home)
    if build is None:
        pytest.skip(f"no vLLM venv in {home} (tests/test_e2e_vllm.py builds it)")
    return Path(build["python"])


@pytest.mark.e2e
def test_vllms_own_code_takes_the_body_and_writes_the_answer_we_read():
    payload = candidates_payload(PROMPT, PREFIX, False, TOP_N)
    asked = {"payload": {**payload, "model": "m"}, "generated": GENERATED, "steps": STEPS}
    done = subprocess.run([str(vllm_python()), str(Path(__file__).with_name("vllm_logprobs_shape.py"))],
                          input=json.dumps(asked), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    told = json.loads(done.stdout)
    assert told["unknown_fields"] == []  # vLLM would accept and ignore a misspelt field
    assert told["sampling"] == {"max_tokens": 3, "temperature": 0.0, "ignore_eos": True, "logprobs": TOP_N,
                                "prompt_logprobs": None}  # fmt: skip
    assert parse_candidates(told["response"]) == parse_candidates(documented_response(STEPS, GENERATED))
