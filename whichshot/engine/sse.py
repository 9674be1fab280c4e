"""A lean streaming client: one connection per shot, a timestamp per server event."""

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import requests
from urllib3.exceptions import DecodeError, ProtocolError, ReadTimeoutError, SSLError

from whichshot.errors import WhichshotError


class MalformedStream(WhichshotError):
    """The engine sent something that is not the JSON event stream we asked for."""


class EngineRefused(WhichshotError):
    """The engine answered with an error (HTTP status or error event) instead of a result."""


@dataclass
class StreamedResponse:
    """Raw record of one streamed request: when it was sent and when each event arrived."""

    t_request_s: float
    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    t_end_s: float | None = None
    http_status: int | None = None
    # Each event's delivery: a new one begins with a read that had to wait for its bytes; a read
    # that found them already there (in one read, or buffered behind it) continues the last one.
    deliveries: list[int] = field(default_factory=list)


def post_stream(
    url: str,
    payload: dict[str, Any],
    timeout_s: float,
    max_events: int,
    on_first_event: Callable[[], None] | None = None,
    enough: Callable[[list[tuple[float, dict[str, Any]]]], bool] | None = None,
    headers: dict[str, str] | None = None,
) -> StreamedResponse:
    """POST `payload` with stream=true and timestamp every `data:` event on the monotonic clock as
    its bytes are read, with its delivery (measure.timing refuses a shot whose tokens all came in
    one); `on_first_event` is called once the first event is stored (it must not block). Where
    `enough` says the events so far suffice, reading stops and the connection closes (a server that
    sees it close ends the request: a probe that needs part of a long answer waits for no more).
    headers are added to the request's own (an attached server's Authorization)."""
    headers = {"Connection": "close", "Accept": "text/event-stream", "Content-Type": "application/json",
               **(headers or {})}  # fmt: skip
    body = json.dumps(payload).encode("utf-8")  # built first: the clock starts as the bytes go out
    record = StreamedResponse(t_request_s=time.monotonic())
    with requests.post(url, data=body, stream=True, timeout=timeout_s, headers=headers) as resp:
        record.http_status = resp.status_code
        if resp.status_code != 200:
            raise EngineRefused(f"engine refused the request (HTTP {resp.status_code}): {_error_text(resp)}")
        if "Content-Length" in resp.headers:
            # A body of known length was written whole: its events would all share one arrival time.
            raise MalformedStream("the answer came as one body (Content-Length), not as a stream")
        for t_arrival, delivery, data in _sse_data_lines(resp):
            if data == "[DONE]":
                break
            record.events.append((t_arrival, _parse_event(data)))
            record.deliveries.append(delivery)
            if on_first_event is not None and len(record.events) == 1:
                on_first_event()
            if len(record.events) > max_events:
                raise MalformedStream(f"more than {max_events} events: output far longer than asked")
            if enough is not None and enough(record.events):
                break
    record.t_end_s = time.monotonic()
    return record


# A read that returns sooner than this found its bytes already there: it waited for nothing. Such
# reads took 0.01-0.07 ms here; a client keeping up with the fastest engine seen (an event every
# ~0.5 ms: llama.cpp at 1,900 tok/s on an H200) waits some 0.4 ms for each, and only a stream all
# of whose reads wait less than this counts as one delivery (measure.timing refuses it).
WAITED_S = 1e-4


def _sse_data_lines(resp: requests.Response) -> Iterator[tuple[float, int, str]]:
    """Each `data:` payload with the time the read that completed it returned (the events of one
    read share it: nothing tells when each left the server) and its delivery number."""
    buffer, delivery = b"", 0
    while True:
        t_before_s = time.monotonic()
        chunk = _read_available(resp)
        t_read_s = time.monotonic()
        if not chunk:
            return
        delivery += t_read_s - t_before_s >= WAITED_S
        buffer += chunk
        while b"\n" in buffer:
            raw_line, buffer = buffer.split(b"\n", 1)
            line = _decode(raw_line).strip()
            if line.startswith("data:"):
                yield t_read_s, delivery, line[5:].strip()
            elif line.startswith("error:"):
                raise EngineRefused(f"engine error event: {_short(line[6:])}")


def _read_available(resp: requests.Response) -> bytes:
    """The bytes that have come (waiting, without polling, for at least one), b"" at the end."""
    # One read of the socket, whatever the framing: iter_content(chunk_size=None) reads a chunked
    # body chunk by chunk, but a close-delimited one (HTTP/1.0, no length) whole, to its end. The
    # urllib3 errors become the requests errors that iter_content would raise.
    try:
        return resp.raw.read1(decode_content=True)
    except ProtocolError as exc:
        raise requests.exceptions.ChunkedEncodingError(exc) from exc
    except DecodeError as exc:
        raise requests.exceptions.ContentDecodingError(exc) from exc
    except ReadTimeoutError as exc:
        raise requests.exceptions.ConnectionError(exc) from exc
    except SSLError as exc:
        raise requests.exceptions.SSLError(exc) from exc


def _decode(raw_line: bytes) -> str:
    try:
        return raw_line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedStream(f"invalid UTF-8 in event stream at byte {exc.start}") from None


def _parse_event(data: str) -> dict[str, Any]:
    try:
        event = json.loads(data)
    except json.JSONDecodeError as exc:
        raise MalformedStream(f"malformed JSON event ({exc.msg}): {_short(data)}") from None
    if not isinstance(event, dict):
        raise MalformedStream(f"event is not a JSON object: {_short(data)}")
    if "error" in event:
        # llama-server reports an error after the stream began as a data event, not a status.
        raise EngineRefused(f"engine error during the stream: {_message(event['error'])}")
    return event


def _error_text(resp: requests.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return _short(resp.text)
    return _message(body.get("error", body) if isinstance(body, dict) else body)


def _message(error: Any) -> str:
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return _short(error["message"])
    return _short(json.dumps(error))


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
