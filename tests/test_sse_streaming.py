"""Each event is timed as it arrives, whatever the framing of the stream: an HTTP/1.0 body that
ends when the connection closes as well as HTTP/1.1 chunks. The stand-in engines send their events
over time (else a client that reads the whole body at once would pass every timing test)."""

import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from whichshot.engine.process import LOOPBACK, EngineProcess, free_port, http_ok
from whichshot.engine.sse import post_stream

TESTS = Path(__file__).resolve().parent
GAP_S = 0.05
N_EVENTS = 8  # 7 tokens, then the final event
SPREAD_S = (N_EVENTS - 1) * GAP_S  # 0.35 s from the first event to the last
FRAMINGS = {"http1.0-close-delimited": [], "http1.1-chunked": ["--chunked"]}


@contextmanager
def serving(tmp_path: Path, argv_after_port: list[str]) -> Iterator[int]:
    """A stand-in engine (argv without its port) on a free loopback port, until the block ends."""
    port = free_port()
    argv = [sys.executable, argv_after_port[0], str(port), *argv_after_port[1:]]
    with EngineProcess(argv, tmp_path / "engine.log") as process:
        process.wait_ready(lambda: http_ok(f"http://{LOOPBACK}:{port}/health"), 30)
        yield port


def fake_engine(framing: str) -> list[str]:
    return [str(TESTS / "fake_engine_http.py"), "ok", "--gap-s", str(GAP_S), *FRAMINGS[framing]]


def raw_arrivals(port: int) -> tuple[bytes, list[float]]:
    """POST one /completion on a bare socket: the response head and when each `data:` line came."""
    body = b'{"prompt": [1, 2, 3], "n_predict": %d}' % (N_EVENTS - 1)
    head = b"POST /completion HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
    raw, arrivals = b"", []
    with socket.create_connection((LOOPBACK, port), timeout=30) as sock:
        sock.sendall(head % len(body) + body)
        while chunk := sock.recv(65536):
            before = raw.count(b"data: ")
            raw += chunk
            arrivals += [time.monotonic()] * (raw.count(b"data: ") - before)
    return raw.split(b"\r\n\r\n", 1)[0].lower(), arrivals


@pytest.mark.parametrize("framing", FRAMINGS)
def test_each_event_is_timed_when_it_arrives(tmp_path, framing):
    with serving(tmp_path, fake_engine(framing)) as port:
        payload = {"prompt": [1, 2, 3], "n_predict": N_EVENTS - 1}
        cpu_before_s = time.process_time()
        record = post_stream(f"http://{LOOPBACK}:{port}/completion", payload, 30, max_events=20)
        client_cpu_s = time.process_time() - cpu_before_s
    arrivals = [t_arrival_s for t_arrival_s, _event in record.events]
    assert len(arrivals) == N_EVENTS
    assert arrivals[0] - record.t_request_s < 0.1  # TTFT: the first event, not the end of the body
    assert SPREAD_S - 0.05 < arrivals[-1] - arrivals[0] < SPREAD_S + 0.25
    assert client_cpu_s < 0.1 * (record.t_end_s - record.t_request_s)  # it waits on the socket, no polling


@pytest.mark.parametrize("framing", FRAMINGS)
def test_the_fake_engine_sends_its_events_over_time_in_the_framing_asked(tmp_path, framing):
    with serving(tmp_path, fake_engine(framing)) as port:
        head, arrivals = raw_arrivals(port)
    if framing == "http1.1-chunked":
        assert head.startswith(b"http/1.1 200") and b"transfer-encoding: chunked" in head
    else:
        assert head.startswith(b"http/1.0 200")
        assert b"content-length" not in head and b"transfer-encoding" not in head
    assert len(arrivals) == N_EVENTS
    assert arrivals[-1] - arrivals[0] > SPREAD_S - 0.05


def test_the_echo_engine_sends_its_events_over_time(tmp_path):
    with serving(tmp_path, [str(TESTS / "echo_engine.py"), "--gap-s", str(GAP_S)]) as port:
        head, arrivals = raw_arrivals(port)
    assert head.startswith(b"http/1.0 200")
    assert len(arrivals) == N_EVENTS
    assert arrivals[-1] - arrivals[0] > SPREAD_S - 0.05


def test_a_fast_engines_events_are_separate_deliveries(tmp_path):
    """An event every 0.2 ms (5,000 a second, faster than any engine here) is not mistaken for a
    buffered stream: the client waits for most of them, each its own delivery."""
    argv = [str(TESTS / "fake_engine_http.py"), "ok", "--gap-s", "0.0002", "--chunked"]
    with serving(tmp_path, argv) as port:
        record = post_stream(
            f"http://{LOOPBACK}:{port}/completion", {"prompt": [1], "n_predict": 64}, 30, 100
        )
    token_deliveries = record.deliveries[:-1]  # the last event is the final (stop) one
    assert len(token_deliveries) == 64 and len(set(token_deliveries)) > 32
