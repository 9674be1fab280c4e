"""The small interface every engine implements: build, start, shot, stop."""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from whichshot.engine.process import EngineProcess
from whichshot.shots.axes import DEFAULT_COMPILE_CACHE, DEFAULT_PREFILL_CHUNK, ONE_STREAM
from whichshot.shots.caveat import ShotsRule
from whichshot.telemetry.gpus import GpuUse

# The state of an engine's prompt cache where nothing says it (shots' prompt_cache_state).
NOT_KNOWN_CACHE = "not known"
# What warm-up an engine process ran before it reported ready (shots' engine_warmup_run).
ONE_DECODE = "one decode before ready"
NO_WARMUP = "none"
UNKNOWN_WARMUP = "the server's own, not known"
# A mode's draft limits where nothing drafts or the engine does not say (shots' spec_* columns).
UNKNOWN_DRAFT_LIMITS = {"spec_types": None, "spec_draft_cap_tokens": None, "spec_verify_width": None}


@dataclass(frozen=True)
class ServerSettings:
    """How to start one engine process (all from config; argv is built from these, no shell)."""

    threads: int
    context_tokens: int
    port: int = 0
    ready_timeout_s: float = 180.0
    gpu_layers: int = 0
    extra_args: tuple[str, ...] = ()
    warmup: str = "engine_default"  # protocol.engine_warmup: engine_default, on or off
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK  # protocol.prefill_chunk_tokens
    streams: int = ONE_STREAM  # protocol.parallel_streams: slots of the process (requests at once)
    compile_cache: str = DEFAULT_COMPILE_CACHE  # protocol.compile_caches: the cache the process starts with
    # A process that only tokenizes (prompt building): no shot is timed, so an engine may start it
    # lighter (vLLM skips its compile and warm-up).
    tokenize_only: bool = False
    # The config's engine entry, as given (secrets included: never written down from here).
    engine_spec: dict[str, Any] = field(default_factory=dict)


# What a process's start-up said of itself, as shot columns (RunningEngine.startup_facts; None where
# the engine does not say): its KV cache, the start-up phases it logged, what its compile cache held.
STARTUP_FACTS = (
    "kv_cache_mib", "kv_cache_cells", "kv_cache_type", "kv_cache_tokens",
    "engine_load_weights_s", "engine_compile_s", "engine_warmup_s", "engine_init_s", "compile_cache_run",
    "served_model_sha256",
)  # fmt: skip


def compile_caches(engine: "Engine") -> tuple[str, ...]:
    """The protocol.compile_caches values an engine kind can start a process with (a kind without a
    compile cache of its own: only the default)."""
    return getattr(engine, "compile_caches", (DEFAULT_COMPILE_CACHE,))


@dataclass(frozen=True)
class ShotRequest:
    """One request: an exact token sequence and how many tokens to generate."""

    prompt_token_ids: list[int]
    max_output_tokens: int
    ignore_eos: bool
    timeout_s: float
    # Called (without blocking) as the first token arrives: telemetry reads the energy counter there.
    on_first_token: Callable[[], None] | None = field(default=None, compare=False)
    # Called as the stream ends, before any replay, /metrics read or log wait: telemetry takes the
    # shot's end reading there, so the shot's energy holds none of that work.
    on_last_token: Callable[[], object] | None = field(default=None, compare=False)

    def stream_ended(self) -> None:
        """Tell the caller the stream is over (on_last_token), once per stream."""
        if self.on_last_token is not None:
            self.on_last_token()


@dataclass
class ShotOutcome:
    """What one shot produced: our timestamps and what the engine said about itself."""

    t_request_s: float
    t_end_s: float
    token_events: list[tuple[float, int]]
    output_token_ids: list[int | None]  # None: an id the stream did not carry (see engines.stream)
    output_text: str
    prompt_tokens_engine: int | None
    engine_timings: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    # Deltas of the server's process-wide Prometheus counters over the shot ({} = not read).
    server_counters: dict[str, Any] = field(default_factory=dict)
    # How many of output_token_ids the stream itself carried; where they came from if not all.
    output_tokens_streamed: int | None = None
    output_ids_source: str = "stream"
    # Requests the engine served beyond the shot to complete its record (a replay): they count
    # as served by the process, so the next shot's index shows them.
    extra_requests: int = 0
    # True where the engine built the prompt's tokens itself (a chat template around the text, a
    # text prompt it tokenized): then prompt_tokens_engine, not the ids sent, is what it prefilled.
    prompt_built_by_engine: bool = False
    # The model id the engine's answer named (an OpenAI server's `model` field); None: not said.
    served_model: str | None = None
    # Which of the stream's events were the token events, and the delivery (engine.sse) each came
    # in (None: not known).
    token_event_indexes: list[int] = field(default_factory=list)
    token_event_deliveries: list[int] | None = None
    # True where the server runs with flags whichshot did not choose (an openai engine: a user's argv
    # or a server it attached to): it may draft without whichshot asking, and without saying so.
    drafting_unchosen: bool = False

    @property
    def token_deliveries(self) -> int | None:
        """How many deliveries carried the token events (None: not known)."""
        return None if self.token_event_deliveries is None else len(set(self.token_event_deliveries))


class RunningEngine(Protocol):
    """A started engine process that serves shots, or a server it attached to."""

    # None: a server whichshot attached to and did not start (no pid, no start-up time, no age).
    process: EngineProcess | None
    ready_s: float | None
    context_tokens: int | None
    prompt_cache: str  # whether a prompt prefix can be reused between requests, and what says so
    # The warm-up its process showed it ran before it reported ready (ONE_DECODE or NO_WARMUP), as
    # its log or its own answer says; None where nothing it shows tells (shots' engine_warmup_run).
    warmup_observed: str | None

    # A server whichshot attached to may also say when its process started, read before each shot
    # so that a restart is seen (None where it does not say):
    # def process_start_mark(self) -> str | None

    def tokenize(self, text: str, parse_special: bool = False) -> list[int]: ...

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str: ...

    def detokenize(self, token_ids: list[int]) -> str: ...

    def shot(self, request: ShotRequest) -> ShotOutcome: ...

    # Engines whose kind sets parallel_streams also serve the same request on N slots at once:
    # def shot_streams(self, request: ShotRequest, streams: int) -> list[ShotOutcome]
    # Engines whose kind has forced_acceptance_args also time each decode step of one request
    # (measure/verify_probe.py; engines/llama_cpp.py says what the readings hold):
    # def step_readings(self, prompt_token_ids, max_output_tokens, steps, timeout_s, seed=0) -> dict
    # Engines whose kind sets reports_top_candidates also answer the divergence probe's question
    # (whichshot.engine.candidates says what it asks and what the answer holds):
    # def top_candidates(self, prompt_token_ids, prefix_ids, batched, n, timeout_s) -> dict

    def stop(self) -> int | None: ...


class Engine(Protocol):
    """One engine kind: its config, its speculative modes, its caveats; it builds the engine from
    pinned sources and starts processes of it. Register it (whichshot.engine.register) to use it."""

    kind: str
    config_schema: dict[str, Any]  # JSON schema of a config `engines` entry of this kind
    mode_schema: dict[str, Any]  # JSON schema of a spec mode's block for this kind
    legacy_mode_keys: tuple[str, ...]  # keys an older config gave at a mode's top (else ())
    has_bench: bool  # whether bench_argv names a benchmark tool
    caveat_rules: tuple[ShotsRule, ...]  # each run over the shots with every other caveat rule

    def check_config(self, name: str, spec: dict[str, Any]) -> None:
        """Refuse (WhichshotError) what the schema cannot say of an engines entry."""
        ...

    def starts_processes(self, spec: dict[str, Any]) -> bool:
        """Whether this engines entry has whichshot start (and stop) its processes; False for one that
        attaches to a server already running, which can run no cold series and set no warm-up."""
        ...

    def check_mode(self, where: str, settings: dict[str, Any]) -> None:
        """Refuse what the schema cannot say of a spec mode's settings for this kind."""
        ...

    def uses_draft_model(self, settings: dict[str, Any]) -> bool:
        """Whether a spec mode with these settings needs a draft model."""
        ...

    def draft_limits(self, settings: dict[str, Any]) -> dict[str, Any]:
        """A mode's speculative types, cap on tokens drafted per step and positions verified per
        step, as UNKNOWN_DRAFT_LIMITS' keys (None where the kind does not say)."""
        ...

    def gpu_use(self, build: dict[str, Any], settings: "ServerSettings") -> GpuUse:
        """The CUDA devices its processes compute on (telemetry samples those GPUs)."""
        ...

    def build(self, spec: dict[str, Any], cache_root: Path, jobs: int) -> dict[str, Any]:
        """Build (or reuse a cached build) and return build.json's contents."""
        ...

    def start(
        self, build: dict[str, Any], model_path: Path, settings: ServerSettings, log_path: Path
    ) -> RunningEngine:
        """Start one process and return once it reports ready."""
        ...

    def speculative_args(self, mode: dict[str, Any], draft_model_path: Path | None = None) -> list[str]:
        """Server flags of one speculative decoding mode ({} = none), with its draft model if any."""
        ...

    def forced_acceptance_args(self, draft_tokens: int, accept_all: bool) -> list[str] | None:
        """Server flags for the verify probe (measure/verify_probe.py), or None where the kind has none:
        a prompt that ends repeating a block of P distinct tokens is then drafted P - 1 tokens a step
        (up to draft_tokens; none for P = 2), and the target accepts every draft token (accept_all)
        or none, sampling each position it checks as a verification does."""
        ...

    def bench_argv(self, build: dict[str, Any], model_path: Path, settings: "ServerSettings") -> list[str]:
        """The engine's own benchmark tool on the model with these processes' compute settings,
        for the same-work cross-check (measure/bench.py adds the work; empty if it has none)."""
        ...

    # protocol.engine_warmup value -> (its process's extra arguments, what warm-up ran, in words);
    # a value the engine cannot honour is absent (the config check refuses it).
    warmups: dict[str, tuple[tuple[str, ...], str]]
    # Load axes (protocol.prefill_chunk_tokens, protocol.parallel_streams) this kind can set; on
    # the others it runs only their defaults (the config check refuses more).
    load_axes: frozenset[str]
    # Optional: the protocol.compile_caches values it can start a process with (compile_caches());
    # the grid runs the others only on kinds that have them.
    # compile_caches: tuple[str, ...]
