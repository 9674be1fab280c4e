"""Where the transformers engine's decode time goes: the same greedy generation timed four ways in
one process, so the ratios hold on a noisy machine.

  bare       model.generate() alone (no streamer), wall time / generated tokens
  streamer   generate() with engines.hf_server's TokenTimer (per-token timestamps, CUDA sync)
  server     Engine.generate() as the HTTP handler calls it (streamer sending each step's event,
             draft bookkeeping), the events written to memory instead of a socket
  forward    one-token forward passes with the KV cache, no generate() machinery at all
  http       a real hf_server process, one streamed /completion, its engine-reported decode
  bare+T, http+T   the same while whichshot's telemetry sampler runs, as in a shot, with
             T = telemetry (every backend, as a pipeline shot), nvml-no-gpm, linux (one at a time)

    python tools/hf_decode_probe.py MODEL.gguf [--device cuda] [--dtype bfloat16] [--tokens 128]

With --first-shots it times instead the first requests of this fresh process, one run each: a
prompt, the same prompt again, a prompt 37 tokens shorter (new shapes), that one again. A first
shot slower than the repeat points to one-time or per-shape set-up (kernel plans, module loading);
--no-cudnn-sdp turns off PyTorch's cuDNN attention backend to test that one suspect.

Prints one JSON line per variant (tok/s of the decode phase, ms per token) and torch's top
operators for one bare generate() so a per-step cost outside the model shows up by name.
"""

import argparse
import atexit
import io
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engines.hf_server import Engine, TokenTimer, parse_args, weight_placement  # noqa: E402
from engines.transformers_engine import ENGINE  # noqa: E402
from whichshot.engine.base import ServerSettings, ShotRequest  # noqa: E402
from whichshot.telemetry import TelemetryRecorder, close_backends, open_backends  # noqa: E402
from whichshot.telemetry.base import Backend  # noqa: E402
from whichshot.telemetry.nvml import open_nvml  # noqa: E402


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def bare(engine: Engine, ids: torch.Tensor, tokens: int) -> float:
    """Seconds per generated token of generate() minus one prefill-only generate()."""
    kwargs = {"do_sample": False, "attention_mask": torch.ones_like(ids), "min_new_tokens": tokens}
    with torch.inference_mode():
        _sync(engine.device)
        t0 = time.monotonic()
        engine.model.generate(ids, max_new_tokens=1, **{**kwargs, "min_new_tokens": 1})
        _sync(engine.device)
        t1 = time.monotonic()
        engine.model.generate(ids, max_new_tokens=tokens, **kwargs)
        _sync(engine.device)
        t2 = time.monotonic()
    return ((t2 - t1) - (t1 - t0)) / (tokens - 1)


def forward_only(engine: Engine, ids: torch.Tensor, tokens: int) -> float:
    """Seconds per token of a hand-written greedy loop over model() with its KV cache."""
    with torch.inference_mode():
        out = engine.model(ids, use_cache=True)
        past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
        _sync(engine.device)
        t0 = time.monotonic()
        for _ in range(tokens - 1):
            out = engine.model(token, past_key_values=past, use_cache=True)
            past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
        _sync(engine.device)
    return (time.monotonic() - t0) / (tokens - 1)


def via_engine(engine: Engine, prompt: list[int], tokens: int, sync: bool) -> float:
    sink = io.StringIO()

    def send(ids: list[int]) -> None:
        sink.write(f"data: {json.dumps({'tokens': ids, 'content': '', 'stop': False})}\n\n")

    timings = engine.generate(prompt, tokens, True, TokenTimer(sync=sync, send=send))
    return _ms_per_token(timings)


def via_http(probe: argparse.Namespace, prompt: list[int], tokens: int) -> Callable[[], float]:
    """hf_server started and asked exactly as a pipeline shot does (the transformers engine's own
    start() and shot()), and a function timing one request on it."""
    build = {"device": probe.device, "dtype": probe.dtype}  # all of build.json server_argv reads
    settings = ServerSettings(threads=int(probe.threads), context_tokens=len(prompt) + tokens + 1,
                              ready_timeout_s=900)  # fmt: skip
    log = Path(tempfile.mkdtemp(prefix="hf-probe-")) / "hf_server.log"
    server = ENGINE.start(build, probe.model, settings, log)
    atexit.register(server.stop)
    request = ShotRequest(prompt_token_ids=prompt, max_output_tokens=tokens, ignore_eos=True, timeout_s=900)
    return lambda: _ms_per_token(server.shot(request).engine_timings)


def _ms_per_token(timings: dict) -> float:
    return timings["predicted_ms"] / 1000 / (timings["predicted_n"] - 1)


def streamer_only(engine: Engine, ids: torch.Tensor, tokens: int) -> float:
    timer = TokenTimer(sync=engine.device.startswith("cuda"))
    with torch.inference_mode():
        engine.model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                              attention_mask=torch.ones_like(ids), streamer=timer)  # fmt: skip
    return (timer.steps[-1][0] - timer.steps[0][0]) / (len(timer.steps) - 1)


def top_operators(engine: Engine, ids: torch.Tensor, tokens: int) -> str:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if engine.device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof, torch.inference_mode():
        engine.model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                              attention_mask=torch.ones_like(ids))  # fmt: skip
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", type=Path)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", default="2")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--first-shots", action="store_true")
    parser.add_argument("--no-cudnn-sdp", action="store_true")
    probe = parser.parse_args()
    if probe.no_cudnn_sdp:
        torch.backends.cuda.enable_cudnn_sdp(False)
    t0 = time.monotonic()
    engine = Engine(parse_args(["--model", str(probe.model), "--port", "0", "--device", probe.device,
                                "--dtype", probe.dtype, "--threads", probe.threads]))  # fmt: skip
    loaded = {"load_s": round(time.monotonic() - t0, 1), "weights": weight_placement(engine.model),
              "attn": engine.model.config._attn_implementation, "torch": torch.__version__,
              "threads": torch.get_num_threads()}  # fmt: skip
    print(json.dumps(loaded), flush=True)
    prompt = engine.tokenizer("The history of the printing press " * probe.prompt_tokens).input_ids
    prompt = prompt[: probe.prompt_tokens]
    if probe.first_shots:
        first_shots(engine, prompt, probe.tokens)
        return
    ids = torch.tensor([prompt], device=probe.device)
    variants = {
        "bare": lambda: bare(engine, ids, probe.tokens),
        "forward": lambda: forward_only(engine, ids, probe.tokens),
        "streamer": lambda: streamer_only(engine, ids, probe.tokens),
        "server": lambda: via_engine(engine, prompt, probe.tokens, probe.device.startswith("cuda")),
        "http": via_http(probe, prompt, probe.tokens),
    }
    variants["bare"]()  # warm-up: kernels, allocator, caches
    for name, run in variants.items():
        report(name, run)
    # The pipeline samples telemetry (NVML, GPM, /proc) at 4 Hz during every shot: does that cost,
    # and which part of it?
    for label, opener in TELEMETRY_SETS.items():
        backends = opener()
        try:
            with TelemetryRecorder(backends, interval_s=0.25):
                for name in ("bare", "http"):
                    report(f"{name}+{label}", variants[name])
        finally:
            close_backends(backends)
    print(top_operators(engine, ids, 16))


def first_shots(engine: Engine, prompt: list[int], tokens: int) -> None:
    sync = engine.device.startswith("cuda")
    shorter = prompt[:-37]
    for label, shot_prompt in (("first", prompt), ("repeat", prompt), ("new-length", shorter),
                               ("new-length-repeat", shorter)):  # fmt: skip
        t0 = time.monotonic()
        seconds = via_engine(engine, shot_prompt, tokens, sync)
        print(json.dumps({"shot": label, "prompt_tokens": len(shot_prompt), "ms_per_token":
                          round(seconds * 1000, 2), "shot_s": round(time.monotonic() - t0, 2),
                          "cudnn_sdp": torch.backends.cuda.cudnn_sdp_enabled()}), flush=True)  # fmt: skip


def _nvml_without_gpm() -> list[Backend]:
    backend, _caveats, _gpus = open_nvml(0, gpm=False)
    return [backend] if backend is not None else []


TELEMETRY_SETS: dict[str, Callable[[], list[Backend]]] = {
    "telemetry": lambda: open_backends(["auto"])[0],
    "nvml-no-gpm": _nvml_without_gpm,
    "linux": lambda: open_backends(["linux"])[0],
}


def report(name: str, run: Callable[[], float]) -> None:
    seconds = min(run() for _ in range(2))
    print(json.dumps({"variant": name, "ms_per_token": round(seconds * 1000, 2),
                      "tok_per_s": round(1 / seconds, 1)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
