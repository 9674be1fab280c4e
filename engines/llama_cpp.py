"""llama.cpp: built from the vendored source of a pinned llama-cpp-python sdist; served by llama-server."""

import collections
import concurrent.futures
import json
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import requests
import yaml

from engines.build_profile import (
    NinjaLogError,
    ninja_program,
    parse_ninja_log,
    profile_table,
    summarize,
)
from engines.llama_log import LogReader, draft_mean_length, kv_cache_facts, startup_log, warmup_run
from whichshot import pypi
from whichshot.atomic import write_json_atomic, write_text_atomic
from whichshot.cache import exclusive_lock
from whichshot.engine.base import (
    NO_WARMUP,
    ONE_DECODE,
    UNKNOWN_DRAFT_LIMITS,
    ServerSettings,
    ShotOutcome,
    ShotRequest,
)
from whichshot.engine.candidates import candidates_answer, probe_request
from whichshot.engine.machine_lock import measurement_lock
from whichshot.engine.process import LOOPBACK, EngineProcess, ensure_port_free, free_port, start_until_ready
from whichshot.engine.sse import MalformedStream, post_stream
from whichshot.engine.stream import known_positions, reconcile, stream_completion
from whichshot.errors import WhichshotError
from whichshot.hashing import sha256_file, short_id
from whichshot.host import cpu_model
from whichshot.telemetry.gpus import EVERY_VISIBLE_GPU, NO_GPU, GpuUse

CONFIG_SCHEMA: dict[str, Any] = yaml.safe_load("""
type: object
additionalProperties: false
required: [kind, backend, source]
properties:
  kind: {const: llama_cpp}
  backend:
    description: compute backend to build for
    enum: [cpu, cuda]
  threads:
    description: CPU threads the engine uses (-t)
    type: integer
    minimum: 1
    default: 2
  gpu_layers:
    description: layers to offload to the GPU (-ngl); 0 on CPU
    type: integer
    minimum: 0
    default: 0
  cmake_extra_flags:
    description: extra -D flags appended to the build (part of the build id)
    type: array
    items: {type: string, pattern: "^-D[A-Za-z0-9_]+=[A-Za-z0-9_.;-]*$"}
    default: []
  source:
    type: object
    additionalProperties: false
    required: [package, version, sha256, vendored_commit, build_number]
    properties:
      package: {type: string, pattern: "^[A-Za-z0-9_.-]+$"}
      version: {type: string, pattern: "^[0-9][A-Za-z0-9.]*$"}
      sha256: {$ref: "#/$defs/sha256"}
      vendored_commit: {type: string, pattern: "^[0-9a-f]{7,40}$"}
      build_number: {type: integer, minimum: 0}
""")
# A mode's llama_cpp block (the older form gives the same keys at the top of the mode).
MODE_SCHEMA: dict[str, Any] = yaml.safe_load("""
type: object
additionalProperties: false
required: [type]
properties:
  type:
    description: >
      llama-server --spec-type: one type, or a list of types the engine combines (seed 002's draft
      model together with copy drafts: [draft-simple, ngram-simple])
    oneOf:
      - {enum: []}  # DRAFT_CAPS' types, filled in below
      - {type: array, minItems: 1, uniqueItems: true, items: {enum: []}}
  options:
    description: >
      llama-server --spec-* options of this type without the dashes, e.g.
      {spec-ngram-simple-size-n: 4, spec-ngram-simple-size-m: 16} (n-gram length looked up,
      tokens drafted per match) or {spec-ngram-mod-n-max: 15}
    type: object
    propertyNames: {pattern: "^spec-[a-z0-9-]+$"}
    additionalProperties: {type: integer, minimum: 0}
""")
# Each --spec-type's cap on tokens drafted per step: the option that sets it and the pinned
# llama.cpp's default (common/common.h; common_speculative_n_max in common/speculative.cpp takes
# the largest over the types given). ngram-cache drafts at most 8, with no option.
DRAFT_CAPS = {
    "draft-simple": ("spec-draft-n-max", 3),
    "ngram-simple": ("spec-ngram-simple-size-m", 48),
    "ngram-map-k": ("spec-ngram-map-k-size-m", 48),
    "ngram-map-k4v": ("spec-ngram-map-k4v-size-m", 48),
    "ngram-mod": ("spec-ngram-mod-n-max", 64),
    "ngram-cache": (None, 8),
}
# The verify probe's drafter (measure/verify_probe.py): ngram-simple drafts the tokens that followed the
# most recent earlier occurrence of the last PROBE_LOOKUP_TOKENS tokens, up to its size-m
# (common/ngram-map.cpp, common_ngram_simple_draft). On a prompt that ends repeating a block of P
# distinct tokens that occurrence is one block back, so it drafts exactly P - 1 tokens a step, and
# nothing where P - 1 is shorter than the lookup. llama-server's synthetic acceptance (--spec-synth-len,
# "benchmarking only") then accepts every draft token (a mean length of the cap + 1) or none (1),
# whatever the target samples; each step still samples every position up to the first rejection and
# emits what it accepted, as a verification does.
PROBE_LOOKUP_TOKENS = 3
_TYPE_CHOICES = MODE_SCHEMA["properties"]["type"]["oneOf"]
_TYPE_CHOICES[0]["enum"] = _TYPE_CHOICES[1]["items"]["enum"] = list(DRAFT_CAPS)

BINARIES = ("llama-server", "llama-bench")
# Beside build.json: every step of the build with its seconds (build.json has the summary).
PROFILE_TABLE = "build_profile.tsv"
BASE_CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
)
BACKEND_CMAKE_FLAGS = {
    "cpu": (),
    "cuda": ("-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90"),
}
# Unity builds (issue 20) of the host-side libraries llama-server links: common (argument parsing,
# chat templates, sampling), mtmd (multimodal, linked though unused on text), the server's own code.
# They cut the build's compile time by about a quarter; the outputs at temperature 0 are the same.
# ggml (the compute kernels) keeps its own translation units, and src/ keeps upstream's own setting.
# CMAKE_UNITY_BUILD=ON for every target fails on the pinned source: common/json.cpp specialises a
# template after a batch-mate instantiated it, and mtmd-helper*.cpp refuse to follow mtmd's internal
# headers; those three files are compiled alone. Included after project() (CMAKE_PROJECT_INCLUDE),
# its call deferred to the end of the top directory, when every target exists; part of the identity.
UNITY_TARGETS = ("llama-common", "mtmd", "server-context", "llama-server-impl")
UNITY_ALONE = ("common/json.cpp", "tools/mtmd/mtmd-helper.cpp", "tools/mtmd/mtmd-helper-gen.cpp")
UNITY_HOOK = f"""\
# whichshot: unity builds of the host-side libraries llama-server links (issue 20).
if(CMAKE_CURRENT_SOURCE_DIR STREQUAL CMAKE_SOURCE_DIR AND NOT COMMAND whichshot_unity_build)
  function(whichshot_unity_build)
    foreach(target {" ".join(UNITY_TARGETS)})
      if(TARGET ${{target}})
        set_property(TARGET ${{target}} PROPERTY UNITY_BUILD ON)
      endif()
    endforeach()
    foreach(source {" ".join(UNITY_ALONE)})
      set_property(SOURCE "${{CMAKE_SOURCE_DIR}}/${{source}}" DIRECTORY "${{CMAKE_SOURCE_DIR}}/common"
        "${{CMAKE_SOURCE_DIR}}/tools/mtmd" PROPERTY SKIP_UNITY_BUILD_INCLUSION ON)
    endforeach()
  endfunction()
  cmake_language(DEFER CALL whichshot_unity_build)
endif()
"""


class LlamaCpp:
    """The llama.cpp engine: `llama-server` for shots, `llama-bench` for the cross-check."""

    kind = "llama_cpp"
    config_schema = CONFIG_SCHEMA
    mode_schema = MODE_SCHEMA
    legacy_mode_keys = ("type", "options")  # the older form: these settings at a mode's top
    has_bench = True  # llama-bench
    reports_top_candidates = True  # LlamaServer.top_candidates (measure/divergence_probe.py)
    caveat_rules = ()
    load_axes = frozenset({"prefill_chunk_tokens", "parallel_streams"})  # -ub with -b, --parallel
    warmups = {  # llama-server decodes once by itself before it reports ready
        "engine_default": ((), ONE_DECODE),
        "on": ((), ONE_DECODE),
        "off": (("--no-warmup",), NO_WARMUP),
    }

    def check_config(self, name: str, spec: dict[str, Any]) -> None:
        """Nothing the schema leaves open."""

    def starts_processes(self, spec: dict[str, Any]) -> bool:
        return True

    def check_mode(self, where: str, settings: dict[str, Any]) -> None:
        """Nothing the schema leaves open."""

    def uses_draft_model(self, settings: dict[str, Any]) -> bool:
        return "draft-simple" in spec_types(settings)

    def draft_limits(self, settings: dict[str, Any]) -> dict[str, Any]:
        """The mode's types, its cap on tokens drafted per step (the option given, else the engine's
        default; the largest over the types) and the positions the target verifies per step (the
        cap plus the token it samples itself)."""
        types = spec_types(settings)
        if not types:
            return UNKNOWN_DRAFT_LIMITS
        options = settings.get("options", {})
        cap = max(options.get(option, default) for option, default in map(DRAFT_CAPS.get, types))
        return {"spec_types": ",".join(types), "spec_draft_cap_tokens": cap, "spec_verify_width": cap + 1}

    def gpu_use(self, build: dict[str, Any], settings: ServerSettings) -> GpuUse:
        # A CUDA llama-server splits the model over every GPU it sees (--split-mode layer).
        return EVERY_VISIBLE_GPU if build["identity"]["backend"] == "cuda" else NO_GPU

    # -- build ---------------------------------------------------------------------------
    def build(self, spec: dict[str, Any], cache_root: Path, jobs: int) -> dict[str, Any]:
        identity = build_identity(spec)
        build_id = short_id(identity)
        home = cache_root / "engines" / f"llama_cpp-{build_id}"
        with exclusive_lock(cache_root / "engines" / f"llama_cpp-{build_id}.lock"):
            cached = _cached_build(home)
            if cached:
                return cached
            # Compiling takes every core it is given: no measurement on this machine may run beside it.
            with measurement_lock():
                return _build_into(home, spec, identity, build_id, cache_root, jobs)

    def speculative_args(self, mode: dict[str, Any], draft_model_path: Path | None = None) -> list[str]:
        return speculative_args(mode, draft_model_path)

    def forced_acceptance_args(self, draft_tokens: int, accept_all: bool) -> list[str] | None:
        """llama-server flags of the verify probe: copy drafts of up to draft_tokens (PROBE_LOOKUP_TOKENS),
        every draft token accepted, or none."""
        return ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(PROBE_LOOKUP_TOKENS),
                "--spec-ngram-simple-size-m", str(draft_tokens),
                "--spec-synth-len", str(draft_tokens + 1 if accept_all else 1)]  # fmt: skip

    def bench_argv(self, build: dict[str, Any], model_path: Path, settings: ServerSettings) -> list[str]:
        """llama-bench on the model with llama-server's own compute settings (same_work_flags)."""
        binary = build["binaries"]["llama-bench"]["path"]
        return [binary, "-m", str(model_path), *same_work_flags(settings, bench=True)]

    # -- serve ---------------------------------------------------------------------------
    def start(
        self, build: dict[str, Any], model_path: Path, settings: ServerSettings, log_path: Path
    ) -> "LlamaServer":
        if settings.port:
            ensure_port_free(settings.port)
        port = settings.port or free_port()
        argv = server_argv(build["binaries"]["llama-server"]["path"], model_path, settings, port)
        base_url = f"http://{LOOPBACK}:{port}"
        process, ready_s = start_until_ready(argv, log_path, f"{base_url}/health", settings.ready_timeout_s)
        return LlamaServer(process, base_url, ready_s, drafts="--spec-type" in settings.extra_args)


def spec_types(settings: dict[str, Any]) -> list[str]:
    """The --spec-type values of a mode's llama_cpp settings (none for no drafting)."""
    given = settings.get("type")
    return [] if given is None else [given] if isinstance(given, str) else list(given)


def speculative_args(mode: dict[str, Any], draft_model_path: Path | None = None) -> list[str]:
    """llama-server flags of one speculative mode ({} = none); an argument list, never a string."""
    if "type" not in mode:
        return []
    args = ["--spec-type", ",".join(spec_types(mode))]
    if draft_model_path is not None:
        args += ["--spec-draft-model", str(draft_model_path)]
    for option, value in mode.get("options", {}).items():
        args += [f"--{option}", str(value)]
    return args


# Batch size and flash attention: llama.cpp's defaults, given explicitly (with the prefill chunk) to both
# llama-server and llama-bench so that the cross-check runs the same computation.
BATCH_TOKENS = 2048
FLASH_ATTENTION = "auto"


def same_work_flags(settings: ServerSettings, bench: bool = False) -> list[str]:
    """The compute settings llama-server and llama-bench share (each tool's own flag names). The
    prefill chunk is the physical batch (-ub); the logical batch (-b) is never smaller than it."""
    names = ("-t", "-ngl", "-b", "-ub", "-fa") if bench else (
        "--threads", "--n-gpu-layers", "--batch-size", "--ubatch-size", "--flash-attn")  # fmt: skip
    batch = max(BATCH_TOKENS, settings.prefill_chunk)
    values = (settings.threads, settings.gpu_layers, batch, settings.prefill_chunk, FLASH_ATTENTION)
    return [word for name, value in zip(names, values, strict=True) for word in (name, str(value))]


def server_argv(binary: str, model_path: Path, settings: ServerSettings, port: int) -> list[str]:
    """llama-server's argument list: loopback only, the series' slots, no web UI, no prompt cache."""
    return [
        binary,
        "--model", str(model_path),
        "--host", LOOPBACK,
        "--port", str(port),
        *same_work_flags(settings),
        "--ctx-size", str(settings.context_tokens),
        "--parallel", str(settings.streams),
        "--no-webui",
        "--no-cache-prompt",
        "--metrics",
        "--log-verbosity", "4",  # level 4 prints the KV cache size; per request it adds ~25 lines
        *ENGINE.warmups[settings.warmup][0],
        *settings.extra_args,
    ]  # fmt: skip


class LlamaServer:
    """One running llama-server process."""

    def __init__(self, process: EngineProcess, base_url: str, ready_s: float, drafts: bool = False) -> None:
        self.process = process
        self.base_url = base_url
        self.ready_s = ready_s
        self.drafts = drafts  # started with a speculative mode (--spec-type)
        self.prompt_cache = "off (--no-cache-prompt; cache_prompt false per request)"
        self.context_tokens = self._context_tokens()
        self._log = LogReader(process.log_path, process.log_offset)
        startup = startup_log(self._log)
        self.startup_facts = kv_cache_facts(startup)
        self.warmup_observed = warmup_run(startup)  # what its log shows, not what its flags asked

    def _context_tokens(self) -> int | None:
        props = requests.get(f"{self.base_url}/props", timeout=10).json()
        return props.get("default_generation_settings", {}).get("n_ctx")

    def tokenize(self, text: str, parse_special: bool = False) -> list[int]:
        body = {"content": text, "add_special": False, "parse_special": parse_special}
        return requests.post(f"{self.base_url}/tokenize", json=body, timeout=120).json()["tokens"]

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        body = {"messages": messages}
        return requests.post(f"{self.base_url}/apply-template", json=body, timeout=60).json()["prompt"]

    def detokenize(self, token_ids: list[int]) -> str:
        body = {"tokens": token_ids}
        return requests.post(f"{self.base_url}/detokenize", json=body, timeout=120).json()["content"]

    def shot(self, request: ShotRequest) -> ShotOutcome:
        payload = completion_payload(request)
        self._log.read_new()  # what earlier requests left in the log is not this request's
        try:
            outcome = stream_completion(f"{self.base_url}/completion", payload, request)
        except requests.RequestException as exc:
            raise self.process.request_failure(exc) from None
        self._count_nothing_drafted(outcome)
        self._add_log_facts(outcome)
        if None in outcome.output_token_ids:
            self._recover_ids(outcome, payload, request.timeout_s)
        reconcile(outcome, request)
        return outcome

    def shot_streams(self, request: ShotRequest, streams: int) -> list[ShotOutcome]:
        """The same request on `streams` slots at once. The log cannot tell the streams' lines
        apart, so no per-request log facts (mean draft length) are read for them."""
        payload = completion_payload(request)
        url = f"{self.base_url}/completion"
        with concurrent.futures.ThreadPoolExecutor(streams) as pool:
            futures = [pool.submit(stream_completion, url, payload, request) for _ in range(streams)]
            try:
                outcomes = [future.result() for future in futures]
            except requests.RequestException as exc:
                raise self.process.request_failure(exc) from None
        self._log.read_new()
        for outcome in outcomes:
            self._count_nothing_drafted(outcome)
            if None in outcome.output_token_ids:
                self._recover_ids(outcome, payload, request.timeout_s)
            reconcile(outcome, request)
        return outcomes

    def _recover_ids(self, outcome: ShotOutcome, payload: dict[str, Any], timeout_s: float) -> None:
        """Fill the ids the stream held back from a non-streamed replay of the same greedy request in
        the same process, accepted only where the replay has every streamed id at its position and
        the same text; otherwise the ids stay missing and reconcile fails the shot."""
        try:
            response = requests.post(f"{self.base_url}/completion", json={**payload, "stream": False},
                                     timeout=timeout_s)  # fmt: skip
        except requests.RequestException as exc:
            raise self.process.request_failure(exc) from None
        outcome.extra_requests += 1
        try:
            replay = response.json() if response.status_code == 200 else {}
        except ValueError:
            replay = {}
        ids = replay.get("tokens")
        known = known_positions(outcome)
        agrees = (
            isinstance(ids, list)
            and len(ids) == len(outcome.output_token_ids)
            and all(ids[p] == i for p, i in known.items())
            and replay.get("content") == outcome.output_text
        )
        if agrees:
            outcome.output_token_ids = list(ids)
            outcome.output_ids_source = "replay"

    def _count_nothing_drafted(self, outcome: ShotOutcome) -> None:
        """llama-server leaves draft_n and draft_n_accepted out of a request's timings when it drafted
        no token (tools/server/server-common.cpp, server_slot_stats::to_json: only if n_draft_tokens >
        0). On a server that drafts, their absence is a count of 0, not an unknown."""
        timings = outcome.engine_timings
        if self.drafts and "predicted_n" in timings and "draft_n" not in timings:
            timings.update(draft_n=0, draft_n_accepted=0)

    def _add_log_facts(self, outcome: ShotOutcome) -> None:
        """Read the request's log lines; the draft line comes last, and only when the engine drafted."""
        timings = outcome.engine_timings
        drafted = bool(timings.get("draft_n"))
        text = self._log.read_until("draft acceptance =" if drafted else "total time =")
        if drafted:
            timings["draft_mean_len"] = draft_mean_length(
                text, timings.get("draft_n_accepted"), timings["draft_n"]
            )

    def step_readings(
        self, prompt_token_ids: list[int], max_output_tokens: int, steps: int, timeout_s: float, seed: int = 0
    ) -> dict[str, Any]:
        """One greedy request (EOS ignored, the prompt's cache reused from the request before), read
        until `steps` decode steps after the first token are done (the connection then closes): the
        engine's own counts at the end of the first token and of each step, [tokens generated,
        generation ms, draft tokens, accepted draft tokens] (llama-server's timings on every token;
        the tokens of one step share its time, taken as its sampling ends), and what it prefilled."""
        request = ShotRequest(prompt_token_ids, max_output_tokens, ignore_eos=True, timeout_s=timeout_s)
        payload = {
            **completion_payload(request),
            "cache_prompt": True,
            "timings_per_token": True,
            "seed": seed,
        }
        readings: list[list[float]] = []

        def enough(events: list[tuple[float, dict[str, Any]]]) -> bool:
            add_step_reading(readings, events[-1][1])
            return len(readings) > steps + 1  # the first event of the step after the last one asked

        try:
            streamed = post_stream(f"{self.base_url}/completion", payload, timeout_s, max_output_tokens + 2,
                                   enough=enough)  # fmt: skip
        except requests.RequestException as exc:
            raise self.process.request_failure(exc) from None
        first = streamed.events[0][1].get("timings", {}) if streamed.events else {}
        return {
            "readings": readings[: steps + 1],
            "prompt_n": first.get("prompt_n"),
            "cache_n": first.get("cache_n"),
        }

    def top_candidates(
        self, prompt_token_ids: list[int], prefix_ids: list[int], batched: bool, n: int, timeout_s: float
    ) -> dict[str, Any]:
        """The divergence probe's question (whichshot.engine.candidates), answered from /completion's
        n_probs: the raw logits' n most likely tokens at every generated position (no sampler applies
        to them)."""
        prompt, budget = probe_request(prompt_token_ids, prefix_ids, batched)
        request = ShotRequest(prompt, budget, ignore_eos=True, timeout_s=timeout_s)
        payload = {**completion_payload(request), "stream": False, "n_probs": n}
        try:
            response = requests.post(f"{self.base_url}/completion", json=payload, timeout=timeout_s)
            response.raise_for_status()
        except requests.RequestException as exc:
            raise self.process.request_failure(exc) from None
        steps = response.json().get("completion_probabilities") or []
        last = steps[-1].get("top_logprobs", []) if steps else []
        top = {int(c["id"]): float(c["logprob"]) for c in last}
        return candidates_answer(top, [int(step["id"]) for step in steps], "llama-server")

    def stop(self) -> int | None:
        return self.process.stop()


def add_step_reading(readings: list[list[float]], event: dict[str, Any]) -> None:
    """Add an event's counts to the readings, one per decode step: an event at the time of the last
    reading belongs to its step (and updates its token count)."""
    timings = event.get("timings") or {}
    # draft_n and draft_n_accepted are left out until the first draft
    reading = [timings.get("predicted_n"), timings.get("predicted_ms"), timings.get("draft_n", 0),
               timings.get("draft_n_accepted", 0)]  # fmt: skip
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in reading):
        raise MalformedStream(f"an event without llama-server's per-token timings: {str(timings)[:80]}")
    if readings and readings[-1][1] == reading[1]:
        readings[-1] = reading
    else:
        readings.append(reading)


def completion_payload(request: ShotRequest) -> dict[str, Any]:
    """/completion's body for one shot: the exact prompt ids, greedy, no prompt cache, ids back."""
    return {
        "prompt": request.prompt_token_ids,
        "n_predict": request.max_output_tokens,
        "ignore_eos": request.ignore_eos,
        "stream": True,
        "cache_prompt": False,
        "return_tokens": True,
        "temperature": 0.0,
        "top_k": 1,
        "samplers": ["top_k"],
        "seed": 0,
    }


# -- build helpers ------------------------------------------------------------------------
def build_identity(spec: dict[str, Any]) -> dict[str, Any]:
    """Everything that determines the binaries: the build id is a hash of this."""
    source = spec["source"]
    return {
        "engine": "llama_cpp",
        "package": source["package"],
        "version": source["version"],
        "sdist_sha256": source["sha256"],
        "vendored_commit": source["vendored_commit"],
        "build_number": source["build_number"],
        "backend": spec["backend"],
        "cmake_flags": cmake_flags(spec),
        "cmake_project_include": UNITY_HOOK,
        "compiler": _first_line(["c++", "--version"]),
        "cmake": _first_line(["cmake", "--version"]),
        "nvcc": _first_line(["nvcc", "--version"], last=True) if spec["backend"] == "cuda" else None,
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
    }


# ggml's x86 instruction-set options and the /proc/cpuinfo flags that must all be present for each.
X86_FEATURES = (
    ("GGML_SSE42", ("sse4_2",)),
    ("GGML_F16C", ("f16c",)),
    ("GGML_FMA", ("fma",)),
    ("GGML_BMI2", ("bmi2",)),
    ("GGML_AVX", ("avx",)),
    ("GGML_AVX2", ("avx2",)),
    ("GGML_AVX_VNNI", ("avx_vnni",)),
    ("GGML_AVX512", ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")),
    ("GGML_AVX512_VBMI", ("avx512vbmi",)),
    ("GGML_AVX512_VNNI", ("avx512_vnni",)),
    ("GGML_AVX512_BF16", ("avx512_bf16",)),
)
# AMX stays off: on this project's CPU machines (Sapphire Rapids in a VM) ggml's AMX matmul
# crashed llama-server with SIGSEGV in its warm-up run (ggml_backend_amx_mul_mat).
X86_OFF = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")


def cpu_arch_flags(cpu_flags: set[str] | None = None) -> list[str]:
    """On x86: GGML_NATIVE off and each instruction set this CPU reports named on or off (what
    -march=native would pick, less AMX), so the build id says what the binaries use."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return []
    flags = cpu_flags if cpu_flags is not None else _proc_cpu_flags()
    on = [f"-D{option}={'ON' if set(needs) <= flags else 'OFF'}" for option, needs in X86_FEATURES]
    return ["-DGGML_NATIVE=OFF", *on, *(f"-D{option}=OFF" for option in X86_OFF)]


def _proc_cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def cmake_flags(spec: dict[str, Any]) -> list[str]:
    """CMake flags: the fixed set, the CPU's instruction sets, the backend's, the build number,
    then config extras."""
    flags = [*BASE_CMAKE_FLAGS, *cpu_arch_flags(), *BACKEND_CMAKE_FLAGS[spec["backend"]]]
    flags.append(f"-DLLAMA_BUILD_NUMBER={spec['source']['build_number']}")
    # The sdist has no .git: without this, binaries would report commit "unknown".
    flags.append(f"-DLLAMA_BUILD_COMMIT={spec['source']['vendored_commit']}")
    return flags + list(spec["cmake_extra_flags"])


def _cached_build(home: Path) -> dict[str, Any] | None:
    manifest = home / "build.json"
    if not manifest.exists():
        return None
    build = json.loads(manifest.read_text())
    for info in build["binaries"].values():
        path = Path(info["path"])
        if not path.exists() or sha256_file(path) != info["sha256"]:
            return None
    return build


def _build_into(
    home: Path, spec: dict, identity: dict, build_id: str, cache_root: Path, jobs: int
) -> dict[str, Any]:
    source = spec["source"]
    sdist = pypi.download(source["package"], source["version"], cache_root / "sources", sdist=True)
    pypi.verify_sha256(sdist, source["sha256"], f"{source['package']}=={source['version']} sdist")
    started = time.monotonic()
    ninja = ninja_program()
    with tempfile.TemporaryDirectory(dir=cache_root) as scratch:
        src = _extract_vendored(sdist, Path(scratch))
        build_dir = Path(scratch) / "build"
        _run(configure_argv(src, build_dir, spec, ninja))
        compile_started = time.monotonic()
        # One job per allowed core: one more (Ninja, 2 cores) was slower, not faster (issue 20).
        _run(["cmake", "--build", str(build_dir), "-j", str(jobs), "--target", *BINARIES])
        compile_wall_s = time.monotonic() - compile_started
        profile, table = _profile(build_dir, ninja, jobs, compile_wall_s)
        binaries = _install_binaries(build_dir / "bin", home / "bin")
    if table is not None:
        write_text_atomic(home / PROFILE_TABLE, table)
    build = {
        "build_id": build_id,
        "identity": identity,
        "build_seconds": round(time.monotonic() - started, 1),
        "built_at_unix_s": int(time.time()),
        "binaries": binaries,
        "profile": profile,
    }
    write_json_atomic(home / "build.json", build)
    return build


def configure_argv(src: Path, build_dir: Path, spec: dict[str, Any], ninja: str | None) -> list[str]:
    """CMake's configure step; writes the unity hook beside the build directory. The generator
    (Ninja where there is one, else CMake's default) only schedules the same compiler commands:
    the same compiler, flags and sources give the same binaries (measured: issue 20), so it is no
    part of the build id; Ninja's log says where the time went."""
    hook = build_dir.parent / "whichshot-unity.cmake"
    hook.write_text(UNITY_HOOK)
    generator = ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja else []
    include = f"-DCMAKE_PROJECT_INCLUDE={hook}"
    return ["cmake", "-S", str(src), "-B", str(build_dir), *generator, include, *cmake_flags(spec)]


def _profile(
    build_dir: Path, ninja: str | None, jobs: int, wall_s: float
) -> tuple[dict[str, Any], str | None]:
    """build.json's profile and build_profile.tsv's text (none without Ninja: make keeps no log).
    A log that cannot be read costs the profile, never the build."""
    basics = {"generator": "Ninja" if ninja else "Unix Makefiles", "jobs": jobs, "wall_s": round(wall_s, 1)}
    if ninja is None:
        return basics, None
    try:
        steps = parse_ninja_log((build_dir / ".ninja_log").read_text())
    except (OSError, UnicodeDecodeError, NinjaLogError) as exc:
        return {**basics, "unreadable_log": str(exc)}, None
    return summarize(steps, basics["generator"], jobs, wall_s), profile_table(steps)


def _extract_vendored(sdist: Path, scratch: Path) -> Path:
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
        prefix = names[0].split("/")[0] + "/vendor/llama.cpp/"
        members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
        if not members:
            raise WhichshotError(f"{sdist} has no vendor/llama.cpp tree")
        archive.extractall(scratch, members=members, filter="data")
    return scratch / prefix.rstrip("/")


def _install_binaries(built: Path, dest: Path) -> dict[str, dict[str, str]]:
    dest.mkdir(parents=True, exist_ok=True)
    installed = {}
    for name in BINARIES:
        target = dest / name
        shutil.copy2(built / name, target)
        installed[name] = {"path": str(target), "sha256": sha256_file(target)}
    return installed


def _run(argv: list[str]) -> None:
    """One build step; its output goes to sys.stdout (the rule's log), its error into the exception."""
    tail: collections.deque[str] = collections.deque(maxlen=60)
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as step:
        for line in step.stdout:
            sys.stdout.write(line)
            tail.append(line.strip())
    if step.returncode != 0:
        raise WhichshotError(
            f"engine build step failed ({argv[0]} {argv[1]} exited with {step.returncode}): "
            f"{_build_error(list(tail))}"
        )


def _build_error(lines: list[str]) -> str:
    """The first line of the tail that says 'error' and the three after it (CMake puts the reason
    there; make's own 'Error 2' lines come after the compiler's)."""
    lines = [line for line in lines if line]
    hits = [i for i, line in enumerate(lines) if "error" in line.lower()]
    start = hits[0] if hits else max(len(lines) - 1, 0)
    text = " ".join(lines[start : start + 4]) or "no output"
    return text if len(text) <= 300 else text[:300] + "..."


def _first_line(argv: list[str], last: bool = False) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    lines = [line for line in out.splitlines() if line.strip()]
    return (lines[-1] if last else lines[0]) if lines else None


ENGINE = LlamaCpp()
