"""Any OpenAI-compatible server (vLLM, SGLang, TGI, Ollama, llama-server itself), started from an
argument list in config (argv), or one already running that whichshot attaches to (base_url),
measured through its streaming /v1/completions or /v1/chat/completions.

- argv and env come from config; `{port}`, `{model}`, `{host}`, `{threads}`, `{context_tokens}`
  (and `{draft_model}` in a mode's args) are replaced inside each element, never joined into a shell.
- Token counts come from the stream's `usage` (stream_options.include_usage). One streamed chunk
  counts as one token unless the chunk carries `token_ids` (vLLM with return_token_ids); a stream
  whose count disagrees with usage fails the shot rather than time tokens it cannot see.
- Output token ids are the server's where it sends them, else the output text re-tokenized by the
  server after the shot (outside the timed window).
- Speculative counters come from the server's Prometheus /metrics before and after each shot
  (whichshot.engine.prom_metrics): process-wide deltas, stored per shot.
- Tokenizer endpoints differ between servers: `tokenizer_api` picks llama-server's or vLLM's; a
  server without them (llama-cpp-python's own) is refused in one line (tokenizer_answer).
- An attached server (base_url) is not whichshot's: it is never started, restarted or stopped, so it
  runs warm series only, has no start-up time, pid or process age, and its warm-up is its own.
"""

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pandas as pd
import requests
import yaml

from whichshot.engine.base import (
    NOT_KNOWN_CACHE,
    UNKNOWN_DRAFT_LIMITS,
    UNKNOWN_WARMUP,
    ServerSettings,
    ShotOutcome,
    ShotRequest,
)
from whichshot.engine.process import (
    LOOPBACK,
    EngineProcess,
    ensure_port_free,
    free_port,
    http_ok,
    start_until_ready,
)
from whichshot.engine.prom_metrics import counter_deltas, parse_prometheus
from whichshot.engine.sse import MalformedStream, post_stream
from whichshot.engine.stream import check_counts, token_event_deliveries
from whichshot.errors import EngineDied, EngineNotReady, WhichshotError, invalid_config
from whichshot.hashing import sha256_file, short_id
from whichshot.keyed import keyed_engine
from whichshot.redact import redact_engine, redact_url
from whichshot.shots.axes import NO_DRAFT
from whichshot.shots.caveat import Finding, columns_from, flag, flag_false, ids
from whichshot.telemetry.gpus import GpuUse

CONFIG_SCHEMA: dict[str, Any] = yaml.safe_load("""
description: >
  any OpenAI-compatible server, given by exactly one of argv (whichshot starts it; {port}, {model},
  {host}, {threads} and {context_tokens} are replaced inside each element, no shell; it must bind
  127.0.0.1) or base_url (a server already running, which whichshot attaches to: warm series only)
type: object
additionalProperties: false
required: [kind]
properties:
  kind: {const: openai}
  argv:
    description: the server's argument list; argv[0] is a program on PATH or a path (not with base_url)
    type: array
    minItems: 1
    items: {type: string, minLength: 1}
  base_url:
    description: >
      the root URL of a server already running (http://127.0.0.1:8080, without /v1), which
      whichshot attaches to and never starts, restarts or stops: no cold series, no start-up time,
      only engine_warmup engine_default (not with argv); build.json records it without credentials
    type: string
    pattern: '^https?://[^/?# ]+'
  env:
    description: extra environment variables (same placeholders) of a server started from argv (OLLAMA_HOST)
    type: object
    propertyNames: {pattern: "^[A-Za-z_][A-Za-z0-9_]*$"}
    additionalProperties: {type: string}
    default: {}
  ready_path:
    description: polled with GET until it answers 200
    type: string
    pattern: "^/"
    default: /health
  api:
    description: >
      completions (/v1/completions) or chat (/v1/chat/completions: the prompt text as one user
      message)
    enum: [completions, chat]
    default: completions
  prompt_format:
    description: send the prompt as token ids (exact) or as its text (for servers that take only text)
    enum: [token_ids, text]
    default: token_ids
  tokenizer_api:
    description: whose /tokenize and /detokenize endpoints the server has
    enum: [llama_server, vllm]
    default: llama_server
  model_name:
    description: the request's model field (default the one id of /v1/models; required where it lists several)
    type: string
  request_extra:
    description: "fields added to every request, e.g. {return_token_ids: true} for vLLM"
    type: object
    default: {}
  api_key_env:
    description: >
      the name of an environment variable holding the server's API key, sent as
      "Authorization: Bearer <key>" with every request; the name is recorded, the key never
    type: string
    pattern: "^[A-Za-z_][A-Za-z0-9_]*$"
  metrics_path:
    description: Prometheus endpoint read before and after each shot; null = none
    type: [string, "null"]
    default: /metrics
  threads:
    description: value of {threads}
    type: integer
    minimum: 1
    default: 2
  backend:
    description: what the server runs on (recorded; the server's own flags decide)
    enum: [cpu, cuda]
""")
MODE_SCHEMA: dict[str, Any] = yaml.safe_load("""
description: "server flags of this mode, appended to argv ({draft_model} = the draft model's file)"
type: object
additionalProperties: false
required: [args]
properties:
  args:
    type: array
    items: {type: string, minLength: 1}
""")
LOOPBACK_NAMES = ("127.0.0.1", "{host}")

SERVER_KEYS = ("argv", "env", "ready_path", "api", "prompt_format", "tokenizer_api", "model_name",
               "request_extra", "metrics_path")  # fmt: skip
# An attached server's settings: its URL instead of a command and environment.
ATTACH_KEYS = ("base_url", *SERVER_KEYS[2:])


class OpenAICompat:
    """The openai engine: a configured server process; no benchmark tool of its own."""

    kind = "openai"
    config_schema = CONFIG_SCHEMA
    mode_schema = MODE_SCHEMA
    legacy_mode_keys = ()
    has_bench = False
    # The server's own start-up is its command's business: neither on nor off can be promised.
    load_axes: frozenset[str] = frozenset()
    warmups = {"engine_default": ((), UNKNOWN_WARMUP)}

    def check_config(self, name: str, spec: dict[str, Any]) -> None:
        """Exactly one of argv and base_url; a server started from argv must be told to bind 127.0.0.1
        (its sockets are checked again at start)."""
        has_argv, has_url = spec.get("argv") is not None, spec.get("base_url") is not None
        if has_argv and has_url:
            raise invalid_config(
                f"engines.{name}.base_url",
                "give argv (whichshot starts the server) or base_url (whichshot attaches to a running "
                "one), not both",
            )
        if not has_argv and not has_url:
            raise invalid_config(
                f"engines.{name}",
                "give argv (whichshot starts the server) or base_url (whichshot attaches to a running one)",
            )
        if has_url:
            _check_attach(name, spec)
            return
        words = [*spec["argv"], *spec["env"].values()]
        if not any(loop in word for word in words for loop in LOOPBACK_NAMES):
            raise invalid_config(
                f"engines.{name}.argv",
                "the server must bind 127.0.0.1: name {host} or 127.0.0.1 in argv or env",
            )

    def starts_processes(self, spec: dict[str, Any]) -> bool:
        return spec.get("base_url") is None

    def check_mode(self, where: str, settings: dict[str, Any]) -> None:
        """Nothing the schema leaves open."""

    def uses_draft_model(self, settings: dict[str, Any]) -> bool:
        return any("{draft_model}" in arg for arg in settings.get("args", []))

    def draft_limits(self, settings: dict[str, Any]) -> dict[str, Any]:
        return UNKNOWN_DRAFT_LIMITS  # the server's own arguments: not read

    def gpu_use(self, build: dict[str, Any], settings: ServerSettings) -> GpuUse:
        """A server of its own: every GPU its environment leaves it (NVML's process lists say
        which it really uses)."""
        return GpuUse(None, env=settings.engine_spec.get("env") or {})

    @property
    def caveat_rules(self) -> tuple:
        return (server_counters_process_wide, server_attached, server_restart_undetectable,
                engine_on_another_host, drafting_not_declared)  # fmt: skip

    def build(self, spec: dict[str, Any], cache_root: Path, jobs: int) -> dict[str, Any]:
        if not self.starts_processes(spec):
            return _attached_build(spec)
        # build.json records the server's settings with any secret in them redacted, its id comes from
        # them with each secret keyed (whichshot.keyed: two keys or batch sizes are two builds);
        # processes are started from the config's own entry (ServerSettings.engine_spec).
        server = redact_engine(server_keys(spec))
        binary = _resolve_binary(server["argv"][0])
        identity = {"engine": "openai", "server": keyed_engine(server_keys(spec)),
                    "binary_sha256": sha256_file(binary)}  # fmt: skip
        return {
            "build_id": short_id(identity),
            "identity": identity,
            "build_seconds": 0.0,
            "built_at_unix_s": int(time.time()),
            "binaries": {"server": {"path": str(binary), "sha256": identity["binary_sha256"]}},
            "server": server,
        }

    def speculative_args(self, mode: dict[str, Any], draft_model_path: Path | None = None) -> list[str]:
        draft = {"draft_model": str(draft_model_path)} if draft_model_path else {}
        return [substitute(arg, draft) for arg in mode.get("args", [])]

    def bench_argv(self, build: dict[str, Any], model_path: Path, settings: ServerSettings) -> list[str]:
        return []

    def forced_acceptance_args(self, draft_tokens: int, accept_all: bool) -> list[str] | None:
        return None  # no way to make its drafts accepted at will: no verify probe

    def start(
        self, build: dict[str, Any], model_path: Path, settings: ServerSettings, log_path: Path
    ) -> "OpenAIServer":
        if not self.starts_processes(settings.engine_spec):
            return _attach(settings)
        if settings.port:
            ensure_port_free(settings.port)
        port = settings.port or free_port()
        values = placeholders(port, model_path, settings)
        server = server_keys(settings.engine_spec)
        argv = [substitute(arg, values) for arg in server["argv"]] + list(settings.extra_args)
        cache_state = prompt_cache_state(argv)
        env = {key: substitute(value, values) for key, value in server["env"].items()}
        base_url = f"http://{LOOPBACK}:{port}"
        process, ready_s = start_until_ready(
            argv, log_path, f"{base_url}{server['ready_path']}", settings.ready_timeout_s,
            env=_merged_env(env) if env else None, headers=auth_headers(server),
        )  # fmt: skip
        return OpenAIServer(process, base_url, ready_s, server, cache_state)


# Server flags that say whether a prompt prefix is kept between requests (vLLM, SGLang, llama-server).
CACHE_FLAGS = {
    "--enable-prefix-caching": "on", "--no-enable-prefix-caching": "off", "--disable-radix-cache": "off",
    "--cache-prompt": "on", "--no-cache-prompt": "off",
}  # fmt: skip


def prompt_cache_state(argv: list[str]) -> str:
    """The server's prompt cache as its arguments set it (the last such flag wins), else not known."""
    found = [f"{CACHE_FLAGS[a]} ({a})" for a in argv if a in CACHE_FLAGS]
    return found[-1] if found else NOT_KNOWN_CACHE


def server_keys(spec: dict[str, Any]) -> dict[str, Any]:
    """The server settings of an engine entry (defaults from the config schema; model_name alone has
    none: the first of /v1/models)."""
    return {key: spec.get(key) for key in SERVER_KEYS} | _api_key_name(spec)


def _api_key_name(spec: dict[str, Any]) -> dict[str, str]:
    """The API key's variable name where the entry gives one (absent otherwise: builds without it
    keep their ids)."""
    return {"api_key_env": spec["api_key_env"]} if spec.get("api_key_env") else {}


def auth_headers(server: dict[str, Any]) -> dict[str, str]:
    """The Authorization header of a server given api_key_env, its key read from the environment
    here (never stored in the settings, shots or logs); {} without one."""
    name = server.get("api_key_env")
    if not name:
        return {}
    key = os.environ.get(name)
    if not key:
        raise WhichshotError(
            f"api_key_env names the environment variable {name}, which is not set (or empty) here: "
            f"export {name}=<the server's API key> before running"
        )
    return {"Authorization": f"Bearer {key}"}


def placeholders(port: int, model_path: Path, settings: ServerSettings) -> dict[str, str]:
    """The values config argv/env elements may name in braces."""
    return {
        "port": str(port),
        "model": str(model_path),
        "host": LOOPBACK,
        "threads": str(settings.threads),
        "context_tokens": str(settings.context_tokens),
    }


def substitute(element: str, values: dict[str, str]) -> str:
    """Replace `{name}` for known names only (other braces, e.g. JSON in an argument, stay)."""
    for name, value in values.items():
        element = element.replace("{" + name + "}", value)
    return element


def _check_attach(name: str, spec: dict[str, Any]) -> None:
    """What an attached server cannot be given: an environment (it runs in its own) or a URL that
    already names the API's /v1 (whichshot adds the paths)."""
    if spec.get("env"):
        raise invalid_config(
            f"engines.{name}.env", "is for a server whichshot starts (argv); an attached server keeps its own"
        )
    if spec["base_url"].rstrip("/").endswith("/v1"):
        raise invalid_config(
            f"engines.{name}.base_url", "give the server's root URL without /v1 (whichshot adds /v1/...)"
        )


def attach_keys(spec: dict[str, Any]) -> dict[str, Any]:
    """The settings of an attached server (base_url without a trailing slash)."""
    server = {key: spec.get(key) for key in ATTACH_KEYS} | _api_key_name(spec)
    server["base_url"] = server["base_url"].rstrip("/")
    return server


def _attached_build(spec: dict[str, Any]) -> dict[str, Any]:
    """build.json of an attached server: nothing built or hashed, its URL (credentials redacted) and
    settings recorded; whatever program answers there is the user's."""
    server = redact_engine(attach_keys(spec))
    identity = {"engine": "openai", "attached": True, "server": keyed_engine(attach_keys(spec))}
    return {
        "build_id": short_id(identity),
        "identity": identity,
        "build_seconds": 0.0,
        "built_at_unix_s": int(time.time()),
        "binaries": {},
        "server": server,
        "attached_url": server["base_url"],
    }


def _attach(settings: ServerSettings) -> "OpenAIServer":
    """The running server at base_url, once its ready path answers; nothing is started."""
    if settings.extra_args:  # the config check refuses modes with server flags: this is a bug
        raise WhichshotError("an attached openai server cannot be given a speculative mode's server flags")
    server = attach_keys(settings.engine_spec)
    ready_url = f"{server['base_url']}{server['ready_path']}"
    if not http_ok(ready_url, timeout_s=10.0, headers=auth_headers(server)):
        raise EngineNotReady(
            f"no server answers 200 at {redact_url(ready_url)}: start it first (whichshot attaches to "
            "base_url; it never starts or stops that server)"
        )
    return OpenAIServer(None, server["base_url"], None, server, NOT_KNOWN_CACHE)


def _resolve_binary(program: str) -> Path:
    found = shutil.which(program)
    if found is None:
        raise WhichshotError(f"engine openai: server program {program!r} not found (argv[0])")
    return Path(found).resolve()


def _merged_env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}


class OpenAIServer:
    """One running OpenAI-compatible server: a process whichshot started, or (process None) the
    server at base_url it attached to."""

    def __init__(
        self,
        process: EngineProcess | None,
        base_url: str,
        ready_s: float | None,
        server: dict[str, Any],
        prompt_cache: str,
    ) -> None:
        self.process = process
        self.base_url = base_url
        self.ready_s = ready_s
        self.server = server
        self.prompt_cache = prompt_cache
        self.warmup_observed = None  # an OpenAI-compatible server does not say whether it warmed up
        self.headers = auth_headers(server)
        self.model_name = server["model_name"] or self._served_model()
        self.tokenizer = TOKENIZER_APIS[server["tokenizer_api"]](base_url, self.model_name, self.headers)
        self.context_tokens = self.tokenizer.context_tokens()

    def _served_model(self) -> str | None:
        """The one model /v1/models lists (None where it lists none or does not answer); a server
        that lists several is refused: which of them a shot would measure is the server's choice."""
        try:
            answer = requests.get(f"{self.base_url}/v1/models", timeout=10, headers=self.headers)
            models = answer.json().get("data") or []
        except (requests.RequestException, ValueError, AttributeError):
            return None
        names = [str(m.get("id")) for m in models if isinstance(m, dict)]
        if len(names) > 1:
            raise WhichshotError(
                f"the server at {redact_url(self.base_url)} serves {len(names)} models "
                f"({', '.join(names[:5])}): name the one to measure in its engines entry's model_name"
            )
        return names[0] if names else None

    def process_start_mark(self) -> str | None:
        """When the server's process started, as its /metrics says (llama-server's
        Process-Start-Time-Unix header, a Prometheus process_start_time_seconds as vLLM's and other
        Python servers' export): read before each shot, a change means it restarted. None where it
        says neither (no metrics_path, --metrics not given, no such value)."""
        response = self._metrics_response()
        if response is None:
            return None
        if "Process-Start-Time-Unix" in response.headers:
            return f"Process-Start-Time-Unix {response.headers['Process-Start-Time-Unix']}"
        started = parse_prometheus(response.text).get("process_start_time_seconds")
        return None if started is None else f"process_start_time_seconds {started:.3f}"

    def tokenize(self, text: str, parse_special: bool = False) -> list[int]:
        return self.tokenizer.tokenize(text, parse_special)

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages)

    def detokenize(self, token_ids: list[int]) -> str:
        return self.tokenizer.detokenize(token_ids)

    def shot(self, request: ShotRequest) -> ShotOutcome:
        payload, path = self._payload(request)
        before = self._metrics()
        try:
            streamed = post_stream(f"{self.base_url}{path}", payload, request.timeout_s,
                                   request.max_output_tokens + 4, request.on_first_token,
                                   headers=self.headers)  # fmt: skip
        except requests.RequestException as exc:
            raise self._request_failure(exc) from None
        request.stream_ended()
        after = self._metrics_after(before)
        outcome = chunks_outcome(streamed.t_request_s, streamed.t_end_s, streamed.events)
        outcome.token_event_deliveries = token_event_deliveries(
            streamed.deliveries, outcome.token_event_indexes
        )
        outcome.drafting_unchosen = True  # the server's flags are the user's
        # A chat template or a text prompt is the server's to tokenize: its usage counts what it prefilled.
        outcome.prompt_built_by_engine = (
            self.server["api"] == "chat" or self.server["prompt_format"] != "token_ids"
        )
        counted = sum(n for _t, n in outcome.token_events)
        check_counts(counted, outcome.engine_timings.get("predicted_n"), outcome.stop_reason, request)
        if not outcome.output_token_ids and outcome.output_text:
            # The server sent no ids: these are the text's tokens, not necessarily the ones generated.
            outcome.output_token_ids = self.tokenize(outcome.output_text, parse_special=True)
            outcome.output_ids_source = "retokenized text"
        if before is not None and after is not None:
            outcome.server_counters = self._server_counters(before, after)
        return outcome

    def _metrics_after(self, before: dict[str, float] | None) -> dict[str, float] | None:
        """The /metrics read after the stream (a kind whose server counts a request late waits here)."""
        return self._metrics()

    def _server_counters(self, before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
        """The shot's deltas of the server's counters (a kind that reads more of them adds its own)."""
        return counter_deltas(before, after)

    def _payload(self, request: ShotRequest) -> tuple[dict[str, Any], str]:
        ids = request.prompt_token_ids
        # timings_per_token: llama-server then sends its cumulative count with every chunk (other
        # servers ignore the field), which is what a chunk of several tokens needs to be timed right.
        payload: dict[str, Any] = {"max_tokens": request.max_output_tokens, "temperature": 0,
                                   "stream": True, "stream_options": {"include_usage": True},
                                   "timings_per_token": True}  # fmt: skip
        if request.ignore_eos:
            payload["ignore_eos"] = True
        if self.model_name:
            payload["model"] = self.model_name
        if self.server["api"] == "chat":
            payload["messages"] = [{"role": "user", "content": self.detokenize(ids)}]
            path = "/v1/chat/completions"
        else:
            as_ids = self.server["prompt_format"] == "token_ids"
            payload["prompt"] = ids if as_ids else self.detokenize(ids)
            path = "/v1/completions"
        return {**payload, **self.server["request_extra"]}, path

    def _metrics(self) -> dict[str, float] | None:
        response = self._metrics_response()
        return parse_prometheus(response.text) if response is not None else None

    def _metrics_response(self) -> requests.Response | None:
        """The server's answer at metrics_path (None: no path, no answer or not 200)."""
        path = self.server["metrics_path"]
        if not path:
            return None
        try:
            response = requests.get(f"{self.base_url}{path}", timeout=10, headers=self.headers)
        except requests.RequestException:
            return None
        return response if response.status_code == 200 else None

    def _request_failure(self, exc: Exception) -> WhichshotError:
        if self.process is not None:
            return self.process.request_failure(exc)
        # Not our process to watch: an attached server that no longer answers counts as gone.
        if not http_ok(f"{self.base_url}{self.server['ready_path']}", timeout_s=5.0, headers=self.headers):
            return EngineDied(f"the attached server at {redact_url(self.base_url)} stopped answering")
        return WhichshotError(f"request failed: {exc}")

    def stop(self) -> int | None:
        """Stop the process whichshot started; an attached server is left running (not ours)."""
        return self.process.stop() if self.process is not None else None


def chunks_outcome(t_request_s: float, t_end_s: float, events: list) -> ShotOutcome:
    """A ShotOutcome from OpenAI stream chunks. A chunk counts the tokens it carries: its token ids
    where the server sends them, else the step of the server's cumulative count (llama-server's
    per-chunk timings.predicted_n), else one if it holds text; a chunk without text (the role-only
    first chunk of a chat stream, the final one) counts none and does not start TTFT. The count must
    agree with usage.completion_tokens."""
    token_events: list[tuple[float, int]] = []
    token_ids: list[int] = []
    text_parts: list[str] = []
    usage: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    finish = served_model = None
    carried_ids = False
    indexes: list[int] = []
    for index, (t_arrival_s, event) in enumerate(events):
        usage = event.get("usage") or usage
        served_model = event.get("model") if isinstance(event.get("model"), str) else served_model
        previous = timings.get("predicted_n", 0)
        timings = event.get("timings") or timings
        for choice in event.get("choices") or []:
            text, ids = _choice_text(choice), choice.get("token_ids")
            carried_ids = carried_ids or isinstance(ids, list)
            finish = choice.get("finish_reason") or finish
            n = _chunk_tokens(text, ids, timings.get("predicted_n", 0) - previous)
            if n:
                token_events.append((t_arrival_s, n))
                indexes.append(index)
                token_ids.extend(ids or [])
            text_parts.append(text)
    counted = sum(n for _t, n in token_events)
    if usage.get("completion_tokens") is None and not carried_ids and "predicted_n" not in timings:
        raise MalformedStream(
            f"the server sent no usage.completion_tokens, no token ids and no per-chunk count: its {counted} "
            "text chunks cannot be counted as tokens (it must honour stream_options.include_usage)"
        )
    if usage.get("completion_tokens") is not None and usage["completion_tokens"] != counted:
        raise MalformedStream(
            f"{counted} streamed tokens but usage.completion_tokens = {usage['completion_tokens']}: "
            "per-token arrival times are unknown (vLLM: set request_extra return_token_ids: true)"
        )
    engine_timings = dict(timings)
    if "predicted_n" in timings:
        # llama-server's timings name draft_n only where it drafted (server_slot_stats::to_json).
        engine_timings.setdefault("draft_n", 0)
        engine_timings.setdefault("draft_n_accepted", 0)
    engine_timings.setdefault("predicted_n", usage.get("completion_tokens"))
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached is not None:  # the server's own count of prompt tokens it did not compute again
        engine_timings.setdefault("cache_n", cached)
    return ShotOutcome(
        t_request_s=t_request_s,
        t_end_s=t_end_s,
        token_events=token_events,
        output_token_ids=token_ids if len(token_ids) == counted else [],
        output_text="".join(text_parts),
        prompt_tokens_engine=usage.get("prompt_tokens"),
        engine_timings=engine_timings,
        stop_reason={"length": "limit", "stop": "eos"}.get(finish, finish),
        output_tokens_streamed=len(token_ids) if len(token_ids) == counted else 0,
        served_model=served_model,
        token_event_indexes=indexes,
    )


def _chunk_tokens(text: str, ids: Any, counted_step: int) -> int:
    if isinstance(ids, list):
        return len(ids)
    if counted_step > 0:
        return counted_step
    return 1 if text else 0


def _choice_text(choice: dict[str, Any]) -> str:
    if "delta" in choice:
        return (choice["delta"] or {}).get("content") or ""
    return choice.get("text") or ""


class TokenizerMissing(WhichshotError):
    """The server lacks the tokenizer endpoint that tokenizer_api names."""


def tokenizer_answer(
    base_url: str, path: str, body: dict[str, Any], key: str, api: str, headers: dict[str, str] | None = None
) -> Any:
    """`key` of the server's answer to POST `path`, or one line saying what the server lacks."""
    response = requests.post(f"{base_url}{path}", json=body, timeout=120, headers=headers)
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if response.status_code == 200 and isinstance(answer, dict) and key in answer:
        return answer[key]
    raise TokenizerMissing(
        f"the server at {redact_url(base_url)} has no {path} of tokenizer_api {api} (HTTP "
        f"{response.status_code}, no {key!r} in its answer): whichshot sends exact token ids and needs "
        "the server's own tokenizer; give the server's tokenizer_api (llama_server, vllm), or serve the "
        "model with llama-server (engine kind llama_cpp, or openai with llama-server's argv): "
        "llama-cpp-python's own server (python -m llama_cpp.server) has neither"
    )


class LlamaServerTokenizer:
    """llama-server's /tokenize, /detokenize, /apply-template and /props."""

    def __init__(self, base_url: str, model_name: str | None, headers: dict[str, str] | None = None) -> None:
        self.base_url = base_url
        self.headers = headers or {}

    def _post(self, path: str, body: dict[str, Any], key: str) -> Any:
        return tokenizer_answer(self.base_url, path, body, key, "llama_server", self.headers)

    def tokenize(self, text: str, parse_special: bool) -> list[int]:
        body = {"content": text, "add_special": False, "parse_special": parse_special}
        return self._post("/tokenize", body, "tokens")

    def detokenize(self, token_ids: list[int]) -> str:
        return self._post("/detokenize", {"tokens": token_ids}, "content")

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return self._post("/apply-template", {"messages": messages}, "prompt")

    def context_tokens(self) -> int | None:
        props = requests.get(f"{self.base_url}/props", timeout=10, headers=self.headers).json()
        return props.get("default_generation_settings", {}).get("n_ctx")


class VllmTokenizer:
    """vLLM's /tokenize and /detokenize (written from its documented API; not run here)."""

    def __init__(self, base_url: str, model_name: str | None, headers: dict[str, str] | None = None) -> None:
        self.base_url = base_url
        self.model = {"model": model_name} if model_name else {}
        self.headers = headers or {}

    def _post(self, path: str, body: dict[str, Any], key: str) -> Any:
        return tokenizer_answer(self.base_url, path, {**self.model, **body}, key, "vllm", self.headers)

    def tokenize(self, text: str, parse_special: bool) -> list[int]:
        return self._post("/tokenize", {"prompt": text, "add_special_tokens": False}, "tokens")

    def detokenize(self, token_ids: list[int]) -> str:
        return self._post("/detokenize", {"tokens": token_ids}, "prompt")

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        body = {"messages": messages, "add_generation_prompt": True, "add_special_tokens": False}
        return self.detokenize(self._post("/tokenize", body, "tokens"))

    def context_tokens(self) -> int | None:
        answer = requests.get(f"{self.base_url}/v1/models", timeout=10, headers=self.headers)
        models = answer.json().get("data") or []
        return models[0].get("max_model_len") if models else None


TOKENIZER_APIS = {"llama_server": LlamaServerTokenizer, "vllm": VllmTokenizer}
ENGINE = OpenAICompat()


def server_counters_process_wide(shots: pd.DataFrame) -> Finding | None:
    """Caveat: the server's speculative counters are process-wide, read around each shot."""
    counted = shots[shots["server_metrics_source"].notna()]
    if counted.empty:
        return None
    return Finding(
        "server_counters_process_wide",
        "Server-side speculative counts come from the server's Prometheus /metrics, read before and after "
        "each shot: the counters are process-wide, so anything else the server did between the two reads "
        "is counted in (no other client is sent to it here).",
        ids(counted),
        columns=frozenset(c for c in columns_from("engine") if c.startswith("server_")),
    )


ATTACHED_SENTENCE = (
    "whichshot did not start this server: no cold shots, no start-up time; warm shot 1 follows "
    "whatever the server served before."
)


def server_attached(shots: pd.DataFrame) -> Finding | None:
    """Caveat: shots of a server whichshot attached to (base_url) rather than started."""
    attached = shots[flag(shots["engine_attached"])]
    if attached.empty:
        return None
    return Finding("server_attached", ATTACHED_SENTENCE, ids(attached))


def server_restart_undetectable(shots: pd.DataFrame) -> Finding | None:
    """Caveat: an attached server that does not say when its process started."""
    unsaid = shots[flag(shots["engine_attached"]) & shots["engine_process_start_mark"].isna()]
    if unsaid.empty:
        return None
    return Finding(
        "server_restart_undetectable",
        "The attached server does not say when its process started (no Process-Start-Time-Unix header "
        "or process_start_time_seconds on its /metrics: give llama-server --metrics, keep metrics_path): "
        "had it restarted between shots, its fresh process's first shot would count as a warm shot.",
        ids(unsaid),
    )


def engine_on_another_host(shots: pd.DataFrame) -> Finding | None:
    """Caveat: an attached server on another host: this machine's sensors and probes say nothing of it."""
    elsewhere = shots[flag_false(shots["engine_on_this_machine"])]
    if elsewhere.empty:
        return None
    hosts = ", ".join(sorted(set(elsewhere["engine_host"].dropna().astype(str))))
    return Finding(
        "engine_on_another_host",
        f"The engine ran on another host ({hosts}), not on the machine that measured: its telemetry, "
        "hardware identity, threads and physical ceilings are not measured (this machine's sensors and "
        "hardware probe describe the client only); the timings include the network between the two.",
        ids(elsewhere),
    )


def drafting_not_declared(shots: pd.DataFrame) -> Finding | None:
    """Caveat: shots of the mode without drafting from an openai server that reports no draft count."""
    none = shots[(shots["engine_kind"] == OpenAICompat.kind) & (shots["spec_mode"] == NO_DRAFT)]
    silent = none[none["engine_draft_tokens"].isna() & none["server_spec_draft_tokens_delta"].isna()]
    if silent.empty:
        return None
    return Finding(
        "drafting_not_declared",
        "The server reports no draft count (no timings draft_n, no draft-token counter on its /metrics): "
        "that it did not draft in these shots of mode none rests on its events alone, each carrying about "
        "one token (a drafting server's carry several and are refused). One that drafts a token at a time "
        "would pass unseen: give its /metrics (vLLM, llama-server --metrics) to have it checked.",
        ids(silent),
    )
