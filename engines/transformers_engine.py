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

import requests

from engines.base import NO_WARMUP, ONE_DECODE, ServerSettings, ShotOutcome, ShotRequest
from engines.stream import reconcile, stream_outcome
from whichshot.errors import WhichshotError
from whichshot.hashing import short_id
from whichshot.host import cpu_model
from whichshot.measure.process import LOOPBACK, EngineProcess, ensure_port_free, free_port, start_until_ready
from whichshot.measure.sse import post_stream

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVER_MODULE = "engines.hf_server"
PINNED = ("torch", "transformers")


class Transformers:
    """The transformers engine: hf_server for shots; no benchmark tool of its own."""

    kind = "transformers"
    warmups = {"engine_default": ((), NO_WARMUP), "on": (("--warmup",), ONE_DECODE), "off": ((), NO_WARMUP)}

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

    def bench_argv(self, build: dict[str, Any], model_path: Path) -> list[str]:
        return []

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
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS=str(threads))
    return env


class HfServer:
    """One running hf_server process (it speaks the llama-server endpoints the protocol uses)."""

    def __init__(self, process: EngineProcess, base_url: str, ready_s: float) -> None:
        self.process = process
        self.base_url = base_url
        self.ready_s = ready_s
        self.props = requests.get(f"{base_url}/props", timeout=10).json()
        self.context_tokens = self.props["default_generation_settings"]["n_ctx"]

    def tokenize(self, text: str, parse_special: bool = False) -> list[int]:
        body = {"content": text, "add_special": False, "parse_special": parse_special}
        return self._post("/tokenize", body)["tokens"]

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return self._post("/apply-template", {"messages": messages})["prompt"]

    def detokenize(self, token_ids: list[int]) -> str:
        return self._post("/detokenize", {"tokens": token_ids})["content"]

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = requests.post(f"{self.base_url}{path}", json=body, timeout=120)
        if response.status_code != 200:
            raise WhichshotError(f"hf_server {path}: HTTP {response.status_code}: {response.text[:200]}")
        return response.json()

    def shot(self, request: ShotRequest) -> ShotOutcome:
        payload = {"prompt": request.prompt_token_ids, "n_predict": request.max_output_tokens,
                   "ignore_eos": request.ignore_eos, "stream": True}  # fmt: skip
        try:
            streamed = post_stream(f"{self.base_url}/completion", payload, request.timeout_s,
                                   max_events=request.max_output_tokens + 2)  # fmt: skip
        except requests.RequestException as exc:
            raise self.process.request_failure(exc) from None
        outcome = stream_outcome(streamed.t_request_s, streamed.t_end_s, streamed.events, request)
        reconcile(outcome, request)
        return outcome

    def stop(self) -> int | None:
        return self.process.stop()


ENGINE = Transformers()
