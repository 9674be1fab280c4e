"""The transformers engine's own process: one model loaded from a GGUF file, greedy decoding,
served on 127.0.0.1 with the small part of llama-server's HTTP API the protocol uses.

Run as `python -m engines.hf_server --model FILE --port N ...` (an argument list, never a shell).
Timings it reports are measured inside this process on its monotonic clock:
  prompt_ms     generate() called -> first output token (prefill forward, first sampling, setup)
  predicted_ms  first output token -> last output token
  predicted_per_second = (tokens - 1) / predicted_ms (the client's decode formula)
On CUDA every timestamp is taken after torch.cuda.synchronize().
"""

import argparse
import json
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.generation.streamers import BaseStreamer

LOOPBACK = "127.0.0.1"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m engines.hf_server")
    parser.add_argument("--model", type=Path, required=True, help="GGUF file")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--context-tokens", type=int, default=4096)
    parser.add_argument("--prompt-lookup-num-tokens", type=int)
    parser.add_argument("--max-matching-ngram-size", type=int)
    parser.add_argument("--assistant-model", type=Path, help="GGUF file of a draft model")
    parser.add_argument("--num-assistant-tokens", type=int)
    parser.add_argument("--warmup", action="store_true", help="decode one token before reporting ready")
    return parser.parse_args(argv)


def load_causal_lm(path: Path, dtype: str, device: str) -> Any:
    """A model from a GGUF file, every weight dequantised at load to a dense `dtype` tensor on
    `device`; refused (WeightPlacementError) if any weight ends up elsewhere or still packed."""
    kwargs: dict[str, Any] = {"dtype": DTYPES[dtype]}
    if hasattr(transformers, "GgufConfig"):
        # Newer transformers keep GGUF blocks packed and run their own matmul kernels (or unpack a
        # block on every call) unless told otherwise: both engines must serve plain dense weights.
        kwargs["quantization_config"] = transformers.GgufConfig(dequantize=True)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, **kwargs)
    model = model.to(device).eval()
    placement = weight_placement(model)
    expected = {"devices": [torch.device(device).type], "dtypes": [str(DTYPES[dtype])], "packed_modules": 0}
    if placement != expected:
        raise WeightPlacementError(f"{path.name}: weights are {placement}, asked for {expected}")
    return model


class WeightPlacementError(RuntimeError):
    """The loaded weights are not where, or not what, the engine was asked for."""


def weight_placement(model: Any) -> dict[str, Any]:
    """Where the weights really are: device types, dtypes, and modules that hold packed GGUF blocks."""
    params = list(model.parameters())
    return {
        "devices": sorted({p.device.type for p in params}),
        "dtypes": sorted({str(p.dtype) for p in params}),
        "packed_modules": sum(type(m).__name__.lower().startswith("gguf") for m in model.modules()),
    }


class DraftCounter:
    """Drafted tokens, counted where transformers proposes them (its candidate generator)."""

    def __init__(self) -> None:
        self.drafted = 0
        self.per_step: list[int] = []  # drafted tokens of each verification step, in order

    def attach(self, model: Any) -> bool:
        """Wrap the model's candidate generator factory; False where this transformers has none."""
        factory = getattr(model, "_get_candidate_generator", None)
        if factory is None:
            return False

        def counting_factory(*args: Any, **kwargs: Any) -> Any:
            generator = factory(*args, **kwargs)
            propose = generator.get_candidates

            def get_candidates(input_ids: torch.Tensor, *a: Any, **kw: Any) -> Any:
                candidates, logits = propose(input_ids, *a, **kw)
                self.per_step.append(candidates.shape[1] - input_ids.shape[1])
                self.drafted += self.per_step[-1]
                return candidates, logits

            generator.get_candidates = get_candidates
            return generator

        model._get_candidate_generator = counting_factory
        return True


class TokenTimer(BaseStreamer):
    """Receives tokens from generate(): timestamps each step and hands its ids to `send` at once,
    on generate()'s own thread (no second Python thread to contend with it for the GIL)."""

    def __init__(self, sync: bool, send: Callable[[list[int]], None] = lambda ids: None) -> None:
        self.sync = sync
        self.send = send
        self._prompt_seen = False
        self.steps: list[tuple[float, list[int]]] = []

    def now(self) -> float:
        if self.sync:
            torch.cuda.synchronize()
        return time.monotonic()

    def put(self, value: torch.Tensor) -> None:
        if not self._prompt_seen:  # generate() first hands over the prompt itself
            self._prompt_seen = True
            return
        t_s = self.now()
        ids = [int(i) for i in value.reshape(-1).tolist()]
        self.steps.append((t_s, ids))
        self.send(ids)

    def end(self) -> None:
        pass

    def output_ids(self) -> list[int]:
        return [i for _t, ids in self.steps for i in ids]


class Engine:
    """The loaded model(s) and the decoding settings of this process (fixed for its lifetime)."""

    def __init__(self, args: argparse.Namespace) -> None:
        torch.set_num_threads(args.threads)
        self.device = args.device
        self.dtype = args.dtype
        self.tokenizer = AutoTokenizer.from_pretrained(args.model.parent, gguf_file=args.model.name)
        self.model = load_causal_lm(args.model, args.dtype, args.device)
        self.weights = weight_placement(self.model)  # checked by load_causal_lm; fixed from here on
        limit = getattr(self.model.config, "max_position_embeddings", None) or args.context_tokens
        self.n_ctx = min(args.context_tokens, limit)
        self.spec = _spec_kwargs(args)
        self.spec_settings = {k: str(args.assistant_model) if k == "assistant_model" else v
                              for k, v in self.spec.items()}  # fmt: skip
        self.drafts = DraftCounter()
        self.counts_drafts = bool(self.spec) and self.drafts.attach(self.model)
        self.warmed_up = False

    def props(self) -> dict[str, Any]:
        return {
            "default_generation_settings": {"n_ctx": self.n_ctx},
            "device": self.device,
            "dtype": self.dtype,
            "weights": self.weights,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "speculative": self.spec_settings,
            "warmed_up": self.warmed_up,  # whether warm_up() ran before the server reported ready
        }

    def warm_up(self) -> None:
        """One greedy decode of one token on a one-token prompt, before the server reports ready."""
        first = self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None else 0
        self.generate([first], 1, True, TokenTimer(self.device.startswith("cuda")))
        self.warmed_up = True

    def generate(self, prompt: list[int], n_predict: int, ignore_eos: bool, timer: TokenTimer) -> dict:
        """Greedy decoding of up to n_predict tokens; returns the in-process timings."""
        ids = torch.tensor([prompt], device=self.device)
        kwargs = {"max_new_tokens": n_predict, "do_sample": False, "streamer": timer,
                  "attention_mask": torch.ones_like(ids), **self.spec}  # fmt: skip
        if ignore_eos:
            kwargs["min_new_tokens"] = n_predict
        drafted_before = self.drafts.drafted
        self.drafts.per_step = []
        t0 = timer.now()
        with torch.inference_mode():
            self.model.generate(ids, **kwargs)
        return _timings(len(prompt), t0, timer.steps, self._draft_counts(timer, drafted_before))

    def top_candidates(self, prompt: list[int], n_predict: int, n: int) -> dict[str, Any]:
        """The target's n most likely tokens (log-softmax of its raw logits, in float32) at the last of
        n_predict greedily generated positions, and the tokens generated: generate() prefills the
        prompt in one forward and decodes the rest one token at a time, as an undrafted request does
        (the target alone, whatever this process's drafting settings)."""
        ids = torch.tensor([prompt], device=self.device)
        with torch.inference_mode():
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_predict,
                                      min_new_tokens=n_predict, do_sample=False, output_logits=True,
                                      return_dict_in_generate=True)  # fmt: skip
        logprobs = torch.log_softmax(out.logits[-1][0].float(), dim=-1)
        values, tokens = torch.topk(logprobs, n)
        return {
            "top_logprobs": [[t, v] for t, v in zip(tokens.tolist(), values.tolist(), strict=True)],
            "tokens": out.sequences[0, len(prompt) :].tolist(),
        }

    def _draft_counts(self, timer: TokenTimer, drafted_before: int) -> dict[str, int | None]:
        if not self.counts_drafts:
            return {"draft_n": None, "draft_n_accepted": None}
        # Each speculative step emits its accepted draft tokens plus one token of the target model;
        # steps and candidate proposals pair up one to one (one of each per generate() iteration).
        accepted = sum(len(ids) - 1 for _t, ids in timer.steps)
        mean_len = None
        if len(timer.steps) == len(self.drafts.per_step):
            pairs = zip(timer.steps, self.drafts.per_step, strict=True)
            drafted_steps = [len(ids) for (_t, ids), n in pairs if n > 0]
            mean_len = sum(drafted_steps) / len(drafted_steps) if drafted_steps else None
        return {"draft_n": self.drafts.drafted - drafted_before, "draft_n_accepted": accepted,
                "draft_mean_len": mean_len}  # fmt: skip


def _spec_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    if args.prompt_lookup_num_tokens:
        spec: dict[str, Any] = {"prompt_lookup_num_tokens": args.prompt_lookup_num_tokens}
        if args.max_matching_ngram_size:
            spec["max_matching_ngram_size"] = args.max_matching_ngram_size
        return spec
    if args.assistant_model:
        spec = {"assistant_model": load_causal_lm(args.assistant_model, args.dtype, args.device)}
        if args.num_assistant_tokens:
            spec["num_assistant_tokens"] = args.num_assistant_tokens
        return spec
    return {}


def _timings(prompt_n: int, t0: float, steps: list[tuple[float, list[int]]], drafts: dict) -> dict:
    n = sum(len(ids) for _t, ids in steps)
    t_first = steps[0][0] if steps else None
    t_last = steps[-1][0] if steps else None
    prompt_ms = (t_first - t0) * 1000 if t_first is not None else None
    predicted_ms = (t_last - t_first) * 1000 if t_first is not None else None
    return {
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_second": prompt_n / prompt_ms * 1000 if prompt_ms else None,
        "predicted_n": n,
        "predicted_ms": predicted_ms,
        "predicted_per_second": (n - 1) / predicted_ms * 1000 if predicted_ms and n > 1 else None,
        "cache_n": 0,
        **drafts,
    }


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 for chunked transfer: a client reads each chunk as it comes (one event per chunk);
    # every response closes its connection, so one client never holds this single-threaded server.
    protocol_version = "HTTP/1.1"
    engine: Engine  # set on the class before serving

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 -- stdlib signature
        sys.stdout.write(f"{self.address_string()} {format % args}\n")
        sys.stdout.flush()

    def do_GET(self) -> None:  # noqa: N802 -- stdlib name
        if self.path == "/health":
            self._json(200, {"status": "ok"})
        elif self.path == "/props":
            self._json(200, self.engine.props())
        else:
            self._json(404, {"error": {"message": f"no such endpoint {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802 -- stdlib name
        routes = {"/tokenize": self._tokenize, "/detokenize": self._detokenize,
                  "/apply-template": self._template, "/completion": self._completion,
                  "/top_candidates": self._top_candidates}  # fmt: skip
        route = routes.get(self.path)
        if route is None:
            self._json(404, {"error": {"message": f"no such endpoint {self.path}"}})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            route(body)
        except (ValueError, KeyError, TypeError) as exc:
            self._json(400, {"error": {"message": f"{type(exc).__name__}: {exc}"}})

    def _tokenize(self, body: dict) -> None:
        tok = self.engine.tokenizer
        ids = tok(body["content"], add_special_tokens=bool(body.get("add_special", False)),
                  split_special_tokens=not body.get("parse_special", False)).input_ids  # fmt: skip
        self._json(200, {"tokens": ids})

    def _detokenize(self, body: dict) -> None:
        self._json(200, {"content": self._text(body["tokens"])})

    def _template(self, body: dict) -> None:
        tok = self.engine.tokenizer
        if not tok.chat_template:
            raise ValueError("this model has no chat template")
        text = tok.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
        self._json(200, {"prompt": text})

    def _completion(self, body: dict) -> None:
        prompt, n_predict = body["prompt"], int(body["n_predict"])
        if not (isinstance(prompt, list) and all(isinstance(i, int) for i in prompt)) or n_predict < 1:
            raise ValueError("prompt must be a list of token ids and n_predict >= 1")
        if len(prompt) + n_predict > self.engine.n_ctx:
            raise ValueError(
                f"{len(prompt)} prompt + {n_predict} output tokens exceed n_ctx {self.engine.n_ctx}"
            )
        # Token events carry ids only (the client times their arrival); the text, decoded once,
        # comes with the final event, so nothing per token costs more than one small write.
        timer = TokenTimer(self.engine.device.startswith("cuda"), send=self._send_tokens)
        self._start_stream()
        try:
            timings = self.engine.generate(prompt, n_predict, bool(body.get("ignore_eos", False)), timer)
        except Exception as exc:  # reported to the client as an error event, never swallowed
            self._send_line(f"error: {json.dumps({'message': f'{type(exc).__name__}: {exc}'})}\n\n")
        else:
            self._send_final(n_predict, timings, self._text(timer.output_ids()))
        self._end_stream()

    def _top_candidates(self, body: dict) -> None:
        """The divergence probe's question (whichshot.engine.candidates): {prompt, n_predict, n_probs}."""
        prompt, n_predict, n = body["prompt"], int(body["n_predict"]), int(body["n_probs"])
        ids_only = isinstance(prompt, list) and all(isinstance(i, int) for i in prompt)
        if not ids_only or min(n_predict, n) < 1:
            raise ValueError("prompt must be a list of token ids, n_predict and n_probs >= 1")
        if len(prompt) + n_predict > self.engine.n_ctx:
            raise ValueError(f"{len(prompt)} prompt + {n_predict} tokens exceed n_ctx {self.engine.n_ctx}")
        self._json(200, self.engine.top_candidates(prompt, n_predict, n))

    def _send_tokens(self, ids: list[int]) -> None:
        self._send_event({"tokens": ids, "content": "", "stop": False})

    def _text(self, ids: list[int]) -> str:
        return self.engine.tokenizer.decode(
            ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )

    def _send_final(self, n_predict: int, timings: dict, text: str) -> None:
        self._send_event({
            "tokens": [], "content": text, "stop": True,
            "stop_type": "limit" if timings["predicted_n"] >= n_predict else "eos",
            "tokens_predicted": timings["predicted_n"], "tokens_evaluated": timings["prompt_n"],
            "timings": timings,
        })  # fmt: skip

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _send_event(self, event: dict) -> None:
        self._send_line(f"data: {json.dumps(event)}\n\n")

    def _send_line(self, line: str) -> None:
        data = line.encode("utf-8")
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self.wfile.write(data)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    transformers.logging.disable_progress_bar()
    t0 = time.monotonic()
    Handler.engine = Engine(args)
    print(f"hf_server: loaded {args.model.name} on {args.device} as {args.dtype} in "
          f"{time.monotonic() - t0:.1f} s; weights {Handler.engine.weights}", flush=True)  # fmt: skip
    if args.warmup:
        Handler.engine.warm_up()
        print("hf_server: warmed up with one decode", flush=True)
    # Bound only once the model is loaded: /health answering means ready.
    server = HTTPServer((LOOPBACK, args.port), Handler)
    print(f"hf_server: listening on {LOOPBACK}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
