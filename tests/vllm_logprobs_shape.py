"""Run by the vLLM venv's own Python (tests/test_engine_candidates.py), no server: vLLM's own request
model reads the divergence probe's body, and vLLM's own completions code writes a response's logprobs.

stdin: {"payload": the probe's body, "generated": [ids], "steps": [[[id, logprob, rank], ...] per
generated id, the sampled token first, as vLLM's sampler hands them over]}.
stdout: {"unknown_fields": body keys vLLM's request model has no field for (it accepts and ignores
them), "sampling": what the request asks of the sampler, "response": the response as vLLM sends it}.
"""

import json
import sys

from vllm.entrypoints.openai.completion.protocol import (
    CompletionRequest,
    CompletionResponse,
    CompletionResponseChoice,
)
from vllm.entrypoints.openai.completion.serving import OpenAIServingCompletion
from vllm.entrypoints.serve.engine.protocol import UsageInfo
from vllm.logprobs import Logprob


def main() -> None:
    asked = json.load(sys.stdin)
    payload, generated = asked["payload"], asked["generated"]
    request = CompletionRequest.model_validate(payload)
    params = request.to_sampling_params(request.max_tokens)
    steps = [{token: Logprob(logprob, rank) for token, logprob, rank in step} for step in asked["steps"]]
    serving = object.__new__(OpenAIServingCompletion)  # its logprobs code reads no engine state
    serving.return_tokens_as_token_ids = False  # the server's flag: not given, the request decides
    logprobs = serving._create_completion_logprobs(
        token_ids=generated,
        top_logprobs=steps,
        num_output_top_logprobs=request.logprobs,
        tokenizer=None,
        logprob_token_ids=request.logprob_token_ids,
        return_as_token_id=request.return_tokens_as_token_ids,
    )
    choice = CompletionResponseChoice(index=0, text="", logprobs=logprobs, finish_reason="length",
                                      token_ids=generated if request.return_token_ids else None)  # fmt: skip
    usage = UsageInfo(prompt_tokens=len(payload["prompt"]), completion_tokens=len(generated),
                      total_tokens=len(payload["prompt"]) + len(generated))  # fmt: skip
    response = CompletionResponse(model="m", choices=[choice], usage=usage)
    sampling = {name: getattr(params, name) for name in
                ("max_tokens", "temperature", "ignore_eos", "logprobs", "prompt_logprobs")}  # fmt: skip
    json.dump({"unknown_fields": sorted(payload.keys() - CompletionRequest.model_fields.keys()),
               "sampling": sampling, "response": response.model_dump(mode="json")}, sys.stdout)  # fmt: skip


if __name__ == "__main__":
    main()
