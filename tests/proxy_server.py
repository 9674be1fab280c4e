"""A reverse proxy in front of a real server (the cached llama-server), standing in for what sits
between a user's server and whichshot, or for a server that lacks an endpoint.

Run as: python proxy_server.py PORT UPSTREAM_URL [--buffer one|per-event|two] [--flush-bytes N]
        [--hide PATH]... [--extra-model ID]...
Every request goes to UPSTREAM_URL and its answer comes back, except:
- --buffer: a streamed answer (text/event-stream) is read whole from upstream first, then written
  in one write, as HTTP/1.1 chunks: `one` a single chunk (nginx's proxy_buffering re-chunks its
  buffer), `per-event` one chunk per upstream chunk (the framing kept, the timing lost), `two` in
  two writes 5 ms apart (each half its own delivery);
- --flush-bytes N: a streamed answer is passed on whenever N bytes have gathered (and at its end),
  as a proxy with a fixed-size output buffer does (4096 bytes: a common page-sized buffer);
- --hide PATH: answers 404 {"detail": "Not Found"} there (FastAPI's answer, as llama-cpp-python's
  own server gives for /tokenize);
- --extra-model ID: /v1/models lists this id after the upstream's own.
It binds 127.0.0.1 (--bind ADDRESS: another, for a test across a network namespace's link).
"""

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

HOP_HEADERS = {"connection", "transfer-encoding", "content-length", "keep-alive"}


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream = ""
    buffer: str | None = None
    flush_bytes = 0
    hidden: tuple[str, ...] = ()
    extra_models: tuple[str, ...] = ()

    def log_message(self, *_args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 -- http.server's naming
        self._forward("GET", None)

    def do_POST(self) -> None:  # noqa: N802
        self._forward("POST", self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def _forward(self, method: str, body: bytes | None) -> None:
        cls = type(self)
        if self.path.split("?")[0] in cls.hidden:
            not_found = json.dumps({"detail": "Not Found"}).encode()
            self._send(404, {"Content-Type": "application/json"}, not_found)
            return
        headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
        if self.headers.get("Authorization"):
            headers["Authorization"] = self.headers["Authorization"]
        answer = requests.request(method, cls.upstream + self.path, data=body, headers=headers, stream=True,
                                  timeout=300)  # fmt: skip
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS}
        if answer.headers.get("Content-Type", "").startswith("text/event-stream"):
            self._stream(answer, kept)
            return
        content = answer.content
        if self.path == "/v1/models" and cls.extra_models:
            listed = json.loads(content)
            listed["data"] += [{"id": m, "object": "model", "owned_by": "proxy"} for m in cls.extra_models]
            content = json.dumps(listed).encode()
        self._send(answer.status_code, kept, content)

    def _send(self, status: int, headers: dict[str, str], content: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(content)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(content)

    def _stream(self, answer: requests.Response, headers: dict[str, str]) -> None:
        self.send_response(answer.status_code)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        pieces = answer.raw.stream(decode_content=True)  # every upstream piece, as it comes
        if type(self).buffer is None:  # passed on as it comes, or every flush_bytes
            self._pass_on(pieces, type(self).flush_bytes)
            return
        held = [p for p in pieces if p]
        if type(self).buffer == "two":
            whole = b"".join(held)
            middle = whole.index(b"\n\n", len(whole) // 2) + 2  # between two events
            for part in (whole[:middle], whole[middle:]):
                self.wfile.write(_chunk(part))
                self.wfile.flush()
                time.sleep(0.005)
            self.wfile.write(b"0\r\n\r\n")
            return
        if type(self).buffer == "one":
            held = [b"".join(held)]
        self.wfile.write(b"".join(map(_chunk, held)) + b"0\r\n\r\n")  # all of it in one write

    def _pass_on(self, pieces, flush_bytes: int) -> None:
        gathered = b""
        for piece in pieces:
            gathered += piece or b""
            if gathered and len(gathered) >= flush_bytes:
                self.wfile.write(_chunk(gathered))
                self.wfile.flush()
                gathered = b""
        self.wfile.write((_chunk(gathered) if gathered else b"") + b"0\r\n\r\n")


def _chunk(data: bytes) -> bytes:
    return f"{len(data):X}\r\n".encode() + data + b"\r\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description="A reverse proxy for tests.")
    parser.add_argument("port", type=int)
    parser.add_argument("upstream")
    parser.add_argument("--buffer", choices=["one", "per-event", "two"])
    parser.add_argument("--flush-bytes", type=int, default=0)
    parser.add_argument("--hide", action="append", default=[])
    parser.add_argument("--extra-model", action="append", default=[])
    parser.add_argument("--bind", default="127.0.0.1")
    args = parser.parse_args(argv[1:])
    Proxy.upstream, Proxy.buffer = args.upstream.rstrip("/"), args.buffer
    Proxy.flush_bytes = args.flush_bytes
    Proxy.hidden, Proxy.extra_models = tuple(args.hide), tuple(args.extra_model)
    ThreadingHTTPServer((args.bind, args.port), Proxy).serve_forever()


if __name__ == "__main__":
    main(sys.argv)
