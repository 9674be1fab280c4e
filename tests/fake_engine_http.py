"""A stand-in for llama-server that misbehaves on purpose, for protocol-parsing faults only.

The real llama-server cannot be made to send malformed JSON, invalid UTF-8, more tokens than
n_predict, an error event or a stream cut short without its final event, so these faults are
injected here. Everything else in the fault suite runs against the real engine.

Run as: python fake_engine_http.py PORT BEHAVIOUR[,BEHAVIOUR...] [--gap-s S] [--chunked]
The k-th /completion request gets the k-th behaviour (the last one repeats). It speaks the parts
of llama-server's HTTP API that whichshot uses, binds 127.0.0.1 and logs like llama-server does.
Like an engine it sends its events over time, --gap-s apart, as an HTTP/1.0 close-delimited body
or (--chunked) as HTTP/1.1 chunks the way llama-server does.
"""

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

N_CTX = 512
# What each behaviour sends after the HTTP 200 header: a list of raw SSE data payloads.
BEHAVIOURS = ("ok", "malformed_json", "invalid_utf8", "too_many_events", "too_many_tokens",
              "error_event", "no_final", "wrong_types", "http_error", "stops_early", "count_disagrees",
              "held_back", "one_body", "eight_per_event")  # fmt: skip


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
    if behaviour == "eight_per_event":  # as a drafting engine sends its verified steps (vLLM: 8-9 per event)
        steps = [
            {
                "content": " s",
                "tokens": list(range(100 + i, 108 + i)),
                "stop": False,
                "tokens_predicted": i + 8,
            }
            for i in range(0, n_predict, 8)
        ]
        return [*map(_event, steps), _final(prompt_n, n_predict)]
    if behaviour == "one_body":  # sent whole, with a Content-Length: not streamed
        return [b"".join([*tokens, _final(prompt_n, n_predict)])]
    raise ValueError(f"unknown behaviour {behaviour!r}")


def _chunk(data: bytes) -> bytes:
    return f"{len(data):X}\r\n".encode() + data + b"\r\n"


class FakeLlamaServer(BaseHTTPRequestHandler):
    behaviours: list[str] = ["ok"]
    served = 0
    gap_s = 0.01  # between two events
    chunked = False  # set with protocol_version = "HTTP/1.1"

    def log_message(self, *_args: object) -> None:
        pass

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
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
            self._stream(stream(behaviour, body["n_predict"], len(body["prompt"])), behaviour == "one_body")
        # llama-server ends each request's log with this line; whichshot's log reader waits for it.
        print(f"slot print_timing: fake request {cls.served} ({behaviour}) total time = 1.00 ms", flush=True)

    def _stream(self, chunks: list[bytes], one_body: bool) -> None:
        """Send the chunks `gap_s` apart (one body at once with a Content-Length if `one_body`)."""
        chunked = type(self).chunked and not one_body
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        if one_body:
            self.send_header("Content-Length", str(len(chunks[0])))
        elif chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for index, chunk in enumerate(chunks):
                if index:
                    time.sleep(type(self).gap_s)
                self.wfile.write(_chunk(chunk) if chunked else chunk)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading (it refuses a stream far longer than asked): so do we


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description="A misbehaving stand-in for llama-server.")
    parser.add_argument("port", type=int)
    parser.add_argument("behaviours", type=lambda text: text.split(","), help="comma-separated, in order")
    parser.add_argument("--gap-s", type=float, default=FakeLlamaServer.gap_s, help="pause between events")
    parser.add_argument("--chunked", action="store_true", help="HTTP/1.1 chunked, else HTTP/1.0 to close")
    args = parser.parse_args(argv[1:])
    unknown = [b for b in args.behaviours if b not in BEHAVIOURS]
    if unknown:
        raise SystemExit(f"unknown behaviours: {unknown}")
    FakeLlamaServer.behaviours, FakeLlamaServer.gap_s = args.behaviours, args.gap_s
    if args.chunked:
        FakeLlamaServer.chunked, FakeLlamaServer.protocol_version = True, "HTTP/1.1"
    print("llama_kv_cache: size = unknown (fake engine, no KV cache)", flush=True)
    ThreadingHTTPServer(("127.0.0.1", args.port), FakeLlamaServer).serve_forever()


if __name__ == "__main__":
    main(sys.argv)
