"""A stand-in for llama-server that misbehaves on purpose, for protocol-parsing faults only.

The real llama-server cannot be made to send malformed JSON, invalid UTF-8, more tokens than
n_predict, an error event or a stream cut short without its final event, so these faults are
injected here. Everything else in the fault suite runs against the real engine.

Run as: python fake_engine_http.py PORT BEHAVIOUR[,BEHAVIOUR...]
The k-th /completion request gets the k-th behaviour (the last one repeats). It speaks the parts
of llama-server's HTTP API that whichshot uses, binds 127.0.0.1 and logs like llama-server does.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

N_CTX = 512
# What each behaviour sends after the HTTP 200 header: a list of raw SSE data payloads.
BEHAVIOURS = ("ok", "malformed_json", "invalid_utf8", "too_many_events", "too_many_tokens",
              "error_event", "no_final", "wrong_types", "http_error", "stops_early", "count_disagrees",
              "held_back", "one_body")  # fmt: skip


def _event(data: dict) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _token(index: int) -> bytes:
    return _event(
        {"content": f" t{index}", "tokens": [100 + index], "stop": False, "tokens_predicted": index + 1}
    )


def _final(prompt_n: int, predicted_n: int, stop_type: str = "limit") -> bytes:
    timings = {"prompt_n": prompt_n, "prompt_ms": 1.0, "predicted_n": predicted_n, "predicted_ms": 1.0}
    return _event({"content": "", "tokens": [], "stop": True, "stop_type": stop_type, "timings": timings})


def stream(behaviour: str, n_predict: int, prompt_n: int) -> list[bytes]:
    """The SSE chunks of one /completion answer."""
    tokens = [_token(i) for i in range(n_predict)]
    if behaviour == "ok":
        return [*tokens, _final(prompt_n, n_predict)]
    if behaviour == "malformed_json":
        return [tokens[0], b'data: {"content": " t1", "tokens": [101\n\n', _final(prompt_n, n_predict)]
    if behaviour == "invalid_utf8":
        return [tokens[0], b'data: {"content": "\xff\xfe", "tokens": [101]}\n\n', _final(prompt_n, 2)]
    if behaviour == "too_many_events":
        return [_token(i) for i in range(n_predict * 20)] + [_final(prompt_n, n_predict * 20)]
    if behaviour == "too_many_tokens":
        many = {"content": " many", "tokens": list(range(100, 100 + n_predict * 20)), "stop": False}
        return [_event(many), _final(prompt_n, n_predict * 20)]
    if behaviour == "error_event":
        error = {"code": 500, "message": "fake engine ran out of memory", "type": "server_error"}
        return [tokens[0], _event({"error": error})]
    if behaviour == "no_final":
        return tokens[:2]
    if behaviour == "wrong_types":
        return [_event({"content": 7, "tokens": "abc", "stop": False}), _final(prompt_n, 1)]
    if behaviour == "stops_early":  # ignores ignore_eos: stops at an end of sequence after 3 tokens
        return [*tokens[:3], _final(prompt_n, 3, "eos")]
    if behaviour == "count_disagrees":  # every token streamed, but the engine counts one more
        return [*tokens, _final(prompt_n, n_predict + 1)]
    if behaviour == "held_back":  # the first two tokens form one character: only the second id is sent
        second = {"content": " t0t1", "tokens": [101], "stop": False, "tokens_predicted": 2}
        return [_event(second), *tokens[2:], _final(prompt_n, n_predict)]
    if behaviour == "one_body":  # sent whole, with a Content-Length: not streamed
        return [b"".join([*tokens, _final(prompt_n, n_predict)])]
    raise ValueError(f"unknown behaviour {behaviour!r}")


class FakeLlamaServer(BaseHTTPRequestHandler):
    behaviours: list[str] = ["ok"]
    served = 0

    def log_message(self, *_args: object) -> None:
        pass

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 -- http.server's naming
        if self.path == "/health":
            self._json(200, {"status": "ok"})
        elif self.path == "/props":
            self._json(200, {"default_generation_settings": {"n_ctx": N_CTX}})
        else:
            self._json(404, {"error": {"code": 404, "message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        if not body.get("stream", True):  # a replay (not streamed): this stand-in cannot give one
            self._json(501, {"error": {"code": 501, "message": "no replays here"}})
            return
        behaviour = cls.behaviours[min(cls.served, len(cls.behaviours) - 1)]
        cls.served += 1
        if behaviour == "http_error":
            error = {"code": 400, "message": "fake engine refuses this prompt", "type": "invalid_request"}
            self._json(400, {"error": error})
        else:
            chunks = stream(behaviour, body["n_predict"], len(body["prompt"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            if behaviour == "one_body":
                self.send_header("Content-Length", str(len(chunks[0])))
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
        # llama-server ends each request's log with this line; whichshot's log reader waits for it.
        print(f"slot print_timing: fake request {cls.served} ({behaviour}) total time = 1.00 ms", flush=True)


def main(argv: list[str]) -> None:
    port, behaviours = int(argv[1]), argv[2].split(",")
    unknown = [b for b in behaviours if b not in BEHAVIOURS]
    if unknown:
        raise SystemExit(f"unknown behaviours: {unknown}")
    FakeLlamaServer.behaviours = behaviours
    print("llama_kv_cache: size = unknown (fake engine, no KV cache)", flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), FakeLlamaServer).serve_forever()


if __name__ == "__main__":
    main(sys.argv)
