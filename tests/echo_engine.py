"""A small engine kind in one file: everything whichshot knows of an engine, and nothing else
changed to add it. Its server (this same file run as a program) echoes the prompt back: token ids
are UTF-8 bytes, the output repeats the prompt's last bytes, one event every --gap-s seconds
(an HTTP/1.0 close-delimited stream). It exists to prove the engine boundary
(tests/test_engine_boundary.py) and is registered only where a config names it in engine_modules."""

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pandas as pd

from whichshot.engine import register
from whichshot.engine.base import (
    NO_WARMUP,
    ONE_DECODE,
    UNKNOWN_DRAFT_LIMITS,
    ServerSettings,
    ShotOutcome,
    ShotRequest,
)
from whichshot.engine.process import LOOPBACK, free_port, start_until_ready
from whichshot.engine.stream import reconcile, stream_completion
from whichshot.errors import invalid_config
from whichshot.hashing import short_id
from whichshot.shots.caveat import Finding, ids
from whichshot.telemetry.gpus import NO_GPU, GpuUse

CONFIG_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["kind"],
    "properties": {
        "kind": {"const": "echo"},
        "threads": {"type": "integer", "minimum": 1, "default": 1},
        "greeting": {"type": "string", "default": "echo"},
    },
}
MODE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"lookahead": {"type": "integer"}},
}


class Echo:
    kind = "echo"
    config_schema = CONFIG_SCHEMA
    mode_schema = MODE_SCHEMA
    legacy_mode_keys = ()
    has_bench = False
    warmups = {"engine_default": ((), NO_WARMUP), "on": (("--warmup",), ONE_DECODE), "off": ((), NO_WARMUP)}
    load_axes = frozenset()

    def check_config(self, name: str, spec: dict[str, Any]) -> None:
        if not spec["greeting"].strip():
            raise invalid_config(f"engines.{name}.greeting", "must not be blank")

    def starts_processes(self, spec: dict[str, Any]) -> bool:
        return True

    def check_mode(self, where: str, settings: dict[str, Any]) -> None:
        """Nothing beyond the schema."""

    def uses_draft_model(self, settings: dict[str, Any]) -> bool:
        return False

    def gpu_use(self, build: dict[str, Any], settings: ServerSettings) -> GpuUse:
        return NO_GPU

    @property
    def caveat_rules(self) -> tuple:
        return (echo_is_no_model,)

    def build(self, spec: dict[str, Any], cache_root: Path, jobs: int) -> dict[str, Any]:
        identity = {"engine": "echo", "greeting": spec["greeting"]}
        return {"build_id": short_id(identity), "identity": identity, "build_seconds": 0.0,
                "built_at_unix_s": int(time.time()), "binaries": {}}  # fmt: skip

    def start(self, build: dict[str, Any], model_path: Path, settings: ServerSettings, log_path: Path):
        port = settings.port or free_port()
        argv = [sys.executable, __file__, str(port), *self.warmups[settings.warmup][0]]
        url = f"http://{LOOPBACK}:{port}"
        process, ready_s = start_until_ready(argv, log_path, f"{url}/health", settings.ready_timeout_s)
        return EchoServer(process, url, ready_s)

    def speculative_args(self, mode: dict[str, Any], draft_model_path: Path | None = None) -> list[str]:
        return []

    def draft_limits(self, settings: dict[str, Any]) -> dict[str, Any]:
        return UNKNOWN_DRAFT_LIMITS

    def bench_argv(self, build: dict[str, Any], model_path: Path, settings: ServerSettings) -> list[str]:
        return []

    def forced_acceptance_args(self, draft_tokens: int, accept_all: bool) -> list[str] | None:
        return None  # no way to make its drafts accepted at will: no verify probe


class EchoServer:
    def __init__(self, process, base_url: str, ready_s: float) -> None:
        self.process, self.base_url, self.ready_s = process, base_url, ready_s
        self.context_tokens = 4096
        self.prompt_cache = "off (the echo server keeps nothing)"
        self.warmup_observed = ONE_DECODE if "echo: warmed up" in process.log_tail() else NO_WARMUP

    def tokenize(self, text: str, parse_special: bool = False) -> list[int]:
        return list(text.encode("utf-8"))

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return "\n".join(m["content"] for m in messages)

    def detokenize(self, token_ids: list[int]) -> str:
        return bytes(token_ids).decode("utf-8", errors="replace")

    def shot(self, request: ShotRequest) -> ShotOutcome:
        payload = {"prompt": request.prompt_token_ids, "n_predict": request.max_output_tokens}
        outcome = stream_completion(f"{self.base_url}/completion", payload, request)
        reconcile(outcome, request)
        return outcome

    def stop(self) -> int | None:
        return self.process.stop()


def echo_is_no_model(shots: pd.DataFrame) -> Finding | None:
    """Caveat of this kind: its speeds are an echo's, not a model's."""
    echoed = shots[shots["engine_kind"] == Echo.kind]
    if echoed.empty:
        return None
    text = "The echo engine repeats its prompt: its speeds say nothing of a model."
    return Finding("echo_is_no_model", text, ids(echoed))


ENGINE = register(Echo())


class _Handler(BaseHTTPRequestHandler):
    gap_s = 0.01  # between two events

    def log_message(self, *_args: object) -> None:
        pass

    def _send(self, body: bytes, kind: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 -- http.server's naming
        self._send(b'{"status": "ok"}')

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        tail = body["prompt"][-8:] or [32]
        events = [{"content": chr(tail[i % len(tail)]), "tokens": [tail[i % len(tail)]], "stop": False,
                   "tokens_predicted": i + 1} for i in range(body["n_predict"])]  # fmt: skip
        final = {"content": "", "tokens": [], "stop": True, "stop_type": "limit",
                 "timings": {"prompt_n": len(body["prompt"]), "predicted_n": body["n_predict"]}}  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for index, event in enumerate([*events, final]):
                if index:
                    time.sleep(self.gap_s)
                self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: so do we


def serve(argv: list[str]) -> None:
    """Run the echo server: PORT [--warmup] [--gap-s S]."""
    parser = argparse.ArgumentParser(description="The echo engine's server.")
    parser.add_argument("port", type=int)
    parser.add_argument("--warmup", action="store_true")
    parser.add_argument("--gap-s", type=float, default=_Handler.gap_s, help="pause between events")
    args = parser.parse_args(argv)
    _Handler.gap_s = args.gap_s
    print("echo: warmed up" if args.warmup else "echo: no warm-up", flush=True)
    HTTPServer((LOOPBACK, args.port), _Handler).serve_forever()


if __name__ == "__main__":
    serve(sys.argv[1:])
