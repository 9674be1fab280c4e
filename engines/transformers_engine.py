"""HF transformers (PyTorch): the same GGUF file, dequantised, served by engines.hf_server in its
own process, so a cold shot is the first shot of a fresh process exactly as for llama.cpp.

"Build" compiles nothing: it checks the installed torch/transformers against the config's pins
and records them, the device and the dtype in build.json.
"""

import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import requests
import yaml

from whichshot.engine.base import (
    NO_WARMUP,
    ONE_DECODE,
    UNKNOWN_DRAFT_LIMITS,
    ServerSettings,
    ShotOutcome,
    ShotRequest,
)
from whichshot.engine.candidates import candidates_answer, probe_request
from whichshot.engine.process import LOOPBACK, EngineProcess, ensure_port_free, free_port, start_until_ready
from whichshot.engine.stream import reconcile, stream_completion
from whichshot.errors import WhichshotError, invalid_config
from whichshot.hashing import short_id
from whichshot.host import cpu_model
from whichshot.shots.caveat import Finding, ids
from whichshot.telemetry.gpus import NO_GPU, GpuUse

CONFIG_SCHEMA: dict[str, Any] = yaml.safe_load("""
description: >
  HF transformers on PyTorch, in its own process (engines/hf_server.py), loading the same GGUF
  file dequantised to dtype; "build" checks and records the pinned versions (no compile)
type: object
additionalProperties: false
required: [kind, versions]
properties:
  kind: {const: transformers}
  device:
    description: "cpu, cuda, cuda:N, or auto (cuda when torch sees a GPU)"
    type: string
    pattern: "^(auto|cpu|cuda(:[0-9]+)?)$"
    default: auto
  dtype:
    description: dtype the GGUF weights are dequantised to and computed in
    enum: [float32, bfloat16, float16]
    default: float32
  threads:
    description: torch CPU threads (torch.set_num_threads)
    type: integer
    minimum: 1
    default: 2
  versions:
    description: the installed torch and transformers must be these (local suffixes like +cpu aside)
    type: object
    additionalProperties: false
    required: [torch, transformers]
    properties:
      torch: {type: string, pattern: "^[0-9][A-Za-z0-9.]*$"}
      transformers: {type: string, pattern: "^[0-9][A-Za-z0-9.]*$"}
""")
MODE_SCHEMA: dict[str, Any] = yaml.safe_load("""
description: >
  generate() arguments: prompt lookup (prompt_lookup_num_tokens, max_matching_ngram_size)
  or an assistant model (assistant_model: true drafts with draft_model; num_assistant_tokens)
type: object
additionalProperties: false
minProperties: 1
properties:
  prompt_lookup_num_tokens: {type: integer, minimum: 1}
  max_matching_ngram_size: {type: integer, minimum: 1}
  assistant_model: {type: boolean}
  num_assistant_tokens: {type: integer, minimum: 1}
""")

# The folder holding the engines package: hf_server runs as `python -m engines.hf_server`.
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
SERVER_MODULE = "engines.hf_server"
PINNED = ("torch", "transformers")


class Transformers:
    """The transformers engine: hf_server for shots; no benchmark tool of its own."""

    kind = "transformers"
    config_schema = CONFIG_SCHEMA
    mode_schema = MODE_SCHEMA
    legacy_mode_keys = ()
    has_bench = False
    reports_top_candidates = True  # HfServer.top_candidates (measure/divergence_probe.py)
    load_axes: frozenset[str] = frozenset()
    warmups = {"engine_default": ((), NO_WARMUP), "on": (("--warmup",), ONE_DECODE), "off": ((), NO_WARMUP)}

    def check_config(self, name: str, spec: dict[str, Any]) -> None:
        """Nothing the schema leaves open."""

    def starts_processes(self, spec: dict[str, Any]) -> bool:
        return True

    def gpu_use(self, build: dict[str, Any], settings: ServerSettings) -> GpuUse:
        """hf_server computes on the one torch device build.json resolved (cuda is cuda:0)."""
        device, _, ordinal = build["device"].partition(":")
        return GpuUse((int(ordinal or 0),)) if device == "cuda" else NO_GPU

    def check_mode(self, where: str, settings: dict[str, Any]) -> None:
        """Prompt lookup or an assistant model, each with only its own settings."""
        lookup, assistant = "prompt_lookup_num_tokens" in settings, bool(settings.get("assistant_model"))
        if lookup == assistant:
            raise invalid_config(
                where, "give exactly one of prompt_lookup_num_tokens or assistant_model: true"
            )
        if "max_matching_ngram_size" in settings and not lookup:
            raise invalid_config(where, "max_matching_ngram_size belongs to prompt lookup")
        if "num_assistant_tokens" in settings and not assistant:
            raise invalid_config(where, "num_assistant_tokens belongs to assistant_model")

    def uses_draft_model(self, settings: dict[str, Any]) -> bool:
        return bool(settings.get("assistant_model"))

    def draft_limits(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Prompt lookup drafts prompt_lookup_num_tokens per step; an assistant model its
        num_assistant_tokens where given (transformers adapts it otherwise: not known)."""
        if settings.get("assistant_model"):
            types, cap = "assistant_model", settings.get("num_assistant_tokens")
        elif "prompt_lookup_num_tokens" in settings:
            types, cap = "prompt_lookup", settings["prompt_lookup_num_tokens"]
        else:
            return UNKNOWN_DRAFT_LIMITS
        return {"spec_types": types, "spec_draft_cap_tokens": cap, "spec_verify_width": cap and cap + 1}

    @property
    def caveat_rules(self) -> tuple:
        return (dequantised_weights,)

    def build(self, spec: dict[str, Any], cache_root: Path, jobs: int) -> dict[str, Any]:
        identity = build_identity(spec)
        return {
            "build_id": short_id(identity),
            "identity": identity,
            "build_seconds": 0.0,
            "built_at_unix_s": int(time.time()),
            "binaries": {},
            "device": identity["device"],
            "dtype": identity["dtype"],
        }

    def speculative_args(self, mode: dict[str, Any], draft_model_path: Path | None = None) -> list[str]:
        return speculative_args(mode, draft_model_path)

    def bench_argv(self, build: dict[str, Any], model_path: Path, settings: ServerSettings) -> list[str]:
        return []

    def forced_acceptance_args(self, draft_tokens: int, accept_all: bool) -> list[str] | None:
        return None  # no way to make its drafts accepted at will: no verify probe

    def start(
        self, build: dict[str, Any], model_path: Path, settings: ServerSettings, log_path: Path
    ) -> "HfServer":
        if settings.port:
            ensure_port_free(settings.port)
        port = settings.port or free_port()
        argv = server_argv(build, model_path, settings, port)
        base_url = f"http://{LOOPBACK}:{port}"
        process, ready_s = start_until_ready(argv, log_path, f"{base_url}/health", settings.ready_timeout_s,
                                             env=server_env(settings.threads))  # fmt: skip
        return HfServer(process, base_url, ready_s)


def build_identity(spec: dict[str, Any]) -> dict[str, Any]:
    """Installed versions (refused unless they match the pins), device and dtype."""
    import torch  # imported here: only this engine needs the [transformers] extra
    import transformers

    installed = {"torch": torch.__version__, "transformers": transformers.__version__}
    for name in PINNED:
        pinned = spec["versions"][name]
        if installed[name].split("+")[0] != pinned:
            raise WhichshotError(
                f"engine transformers: {name} {installed[name]} is installed but the config pins "
                f"{pinned} (pip install {name}=={pinned})"
            )
    device = _device(spec["device"], torch)
    return {
        "engine": "transformers",
        **installed,
        "python": sys.executable,
        "python_version": platform.python_version(),
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if device.startswith("cuda") else cpu_model(),
        "torch_cuda": torch.version.cuda,
        "dtype": spec["dtype"],
        "threads": spec["threads"],
        "machine": platform.machine(),
    }


def _device(asked: str, torch: Any) -> str:
    if asked == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if asked.startswith("cuda") and not torch.cuda.is_available():
        raise WhichshotError(f"engine transformers: device {asked!r} asked but torch sees no CUDA device")
    return asked


def speculative_args(mode: dict[str, Any], draft_model_path: Path | None = None) -> list[str]:
    """hf_server flags of one mode's transformers settings ({} = none)."""
    args: list[str] = []
    for key in ("prompt_lookup_num_tokens", "max_matching_ngram_size", "num_assistant_tokens"):
        if key in mode:
            args += [f"--{key.replace('_', '-')}", str(mode[key])]
    if mode.get("assistant_model"):
        if draft_model_path is None:
            raise WhichshotError("transformers assistant_model mode needs the mode's draft_model")
        args += ["--assistant-model", str(draft_model_path)]
    return args


def server_argv(build: dict[str, Any], model_path: Path, settings: ServerSettings, port: int) -> list[str]:
    """hf_server's argument list (the harness's own Python; loopback only)."""
    return [
        sys.executable, "-m", SERVER_MODULE,
        "--model", str(model_path),
        "--port", str(port),
        "--device", build["device"],
        "--dtype", build["dtype"],
        "--threads", str(settings.threads),
        "--context-tokens", str(settings.context_tokens),
        *ENGINE.warmups[settings.warmup][0],
        *settings.extra_args,
    ]  # fmt: skip


def server_env(threads: int) -> dict[str, str]:
    """Our environment plus: the repo importable, no hub access, the thread count for OpenMP."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS=str(threads))
    return env


class HfServer:
    """One running hf_server process (it speaks the llama-server endpoints the protocol uses)."""

    def __init__(self, process: EngineProcess, base_url: str, ready_s: float) -> None:
        self.process = process
        self.base_url = base_url
        self.ready_s = ready_s
        self.prompt_cache = "off (hf_server keeps no KV cache between requests)"
        self.props = requests.get(f"{base_url}/props", timeout=10).json()
        self.context_tokens = self.props["default_generation_settings"]["n_ctx"]
        self.warmup_observed = ONE_DECODE if self.props["warmed_up"] else NO_WARMUP  # hf_server's own word

    def tokenize(self, text: str, parse_special: bool = False) -> list[int]:
        body = {"content": text, "add_special": False, "parse_special": parse_special}
        return self._post("/tokenize", body)["tokens"]

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return self._post("/apply-template", {"messages": messages})["prompt"]

    def detokenize(self, token_ids: list[int]) -> str:
        return self._post("/detokenize", {"tokens": token_ids})["content"]

    def _post(self, path: str, body: dict[str, Any], timeout_s: float = 120) -> dict[str, Any]:
        response = requests.post(f"{self.base_url}{path}", json=body, timeout=timeout_s)
        if response.status_code != 200:
            raise WhichshotError(f"hf_server {path}: HTTP {response.status_code}: {response.text[:200]}")
        return response.json()

    def shot(self, request: ShotRequest) -> ShotOutcome:
        payload = {"prompt": request.prompt_token_ids, "n_predict": request.max_output_tokens,
                   "ignore_eos": request.ignore_eos, "stream": True}  # fmt: skip
        try:
            outcome = stream_completion(f"{self.base_url}/completion", payload, request)
        except requests.RequestException as exc:
            raise self.process.request_failure(exc) from None
        reconcile(outcome, request)
        return outcome

    def top_candidates(
        self, prompt_token_ids: list[int], prefix_ids: list[int], batched: bool, n: int, timeout_s: float
    ) -> dict[str, Any]:
        """The divergence probe's question (whichshot.engine.candidates), answered by hf_server's
        /top_candidates from the target's own logits."""
        prompt, budget = probe_request(prompt_token_ids, prefix_ids, batched)
        body = {"prompt": prompt, "n_predict": budget, "n_probs": n}
        try:
            answer = self._post("/top_candidates", body, timeout_s)
        except requests.RequestException as exc:
            raise self.process.request_failure(exc) from None
        top = {int(token): float(logprob) for token, logprob in answer["top_logprobs"]}
        return candidates_answer(top, answer["tokens"], "hf_server")

    def stop(self) -> int | None:
        return self.process.stop()


def dequantised_weights(shots: pd.DataFrame) -> Finding | None:
    """Caveat: this engine computes in a wider format than the quantised file it reads."""
    hf = shots[shots["engine_kind"] == Transformers.kind]
    if hf.empty:
        return None
    dtypes = ", ".join(sorted(hf["engine_dtype"].dropna().unique())) or "its dtype"
    return Finding(
        "dequantised_weights",
        f"transformers loads the GGUF file dequantised to {dtypes}: the same weights, held and multiplied "
        "in a wider format than the quantised file (more bytes read per token); its process start (load "
        "and dequantisation) is in process_ready_s, never in a shot. Its engine-reported timings are "
        "hf_server's own: generate() call to first token, first to last token, inside its process.",
        ids(hf),
    )


ENGINE = Transformers()
