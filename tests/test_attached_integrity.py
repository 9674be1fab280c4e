"""What an attached OpenAI-compatible server can do to a measurement, each shown against the real
llama-server (the cached CPU build) started here as a user would, with a small proxy in front where
the fault sits between the server and whichshot (tests/proxy_server.py): a proxy that buffers the
stream, a server that drafts while measured as `none`, one that lists several models, one that
restarts between shots, one without /tokenize (llama-cpp-python's own server), the chat template's
tokens in prefill, prompt-cache hits in warm prefill, and a server on another host."""

import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import requests

from tests.fault_kit import RealEngine, job_context
from tests.test_engine_openai import NGRAM_ARGS, llama_server_binary, model_path  # noqa: F401 -- fixtures
from tests.test_faults_protocol import NO_MODEL, FakeEngine
from whichshot.atomic import JsonlJournal
from whichshot.cache import cache_root
from whichshot.config import with_defaults
from whichshot.engine import engine_host as engine_host_module
from whichshot.engine import load_engine
from whichshot.engine.base import ServerSettings
from whichshot.engine.engine_host import is_this_machine, machine_addresses
from whichshot.engine.process import LOOPBACK, EngineProcess, free_port, http_ok
from whichshot.errors import WhichshotError
from whichshot.figures.table import compute_figures
from whichshot.measure.grid import Job
from whichshot.measure.protocol import JobContext, run_job
from whichshot.measure.series import run_series_with_telemetry
from whichshot.report.plots import tok_s_by_shot_index
from whichshot.report.render import render_report
from whichshot.shots.upgrade import upgrade_shots

PROXY = Path(__file__).resolve().parent / "proxy_server.py"
TEXT = "The quick brown fox jumps over the lazy dog while the cat sleeps by the warm fire. " * 8


def start_server(binary: str, model: Path, log: Path, port: int, extra: list[str]) -> subprocess.Popen:
    """llama-server as a user starts it (not by whichshot), on loopback, once it answers /health."""
    argv = [binary, "--model", str(model), "--host", LOOPBACK, "--port", str(port), "--threads", "1",
            "--ctx-size", "1024", "--parallel", "1", "--no-webui", "--metrics", *extra]  # fmt: skip
    with open(log, "ab") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not http_ok(f"http://{LOOPBACK}:{port}/health") and server.poll() is None:
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.1)
    assert server.poll() is None, log.read_text()[-2000:]
    return server


@contextlib.contextmanager
def users_server(binary: str, model: Path, tmp: Path, extra: list[str] = ()) -> Iterator[str]:
    port = free_port()
    server = start_server(binary, model, tmp / f"server-{port}.log", port, list(extra))
    try:
        yield f"http://{LOOPBACK}:{port}"
    finally:
        server.terminate()
        server.wait(30)


@contextlib.contextmanager
def proxy(upstream: str, tmp: Path, *options: str) -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, str(PROXY), str(port), upstream, *options]
    with EngineProcess(argv, tmp / f"proxy-{port}.log") as process:
        process.wait_ready(lambda: http_ok(f"http://{LOOPBACK}:{port}/health"), 30)
        yield f"http://{LOOPBACK}:{port}"


@pytest.fixture(scope="module")
def plain(llama_server_binary, model_path, tmp_path_factory):  # noqa: F811 -- fixtures above
    """A plain llama-server (no drafting; its prompt cache on, llama-server's default)."""
    with users_server(llama_server_binary, model_path, tmp_path_factory.mktemp("plain")) as url:
        yield url


@pytest.fixture(scope="module")
def prompt_ids(plain) -> list[int]:
    body = {"content": TEXT, "add_special": False}
    return requests.post(f"{plain}/tokenize", json=body, timeout=60).json()["tokens"][:64]


def attach_spec(url: str, **given) -> dict:
    return with_defaults({"engines": {"mine": {"kind": "openai", "base_url": url, **given}}})["engines"][
        "mine"
    ]


def attached_ctx(
    tmp: Path, url: str, ids: list[int], shots: int, output_tokens: int = 8, **given
) -> JobContext:
    """A warm series of `shots` against the server at `url`, as run_series.py builds it."""
    engine = load_engine("openai")
    spec = attach_spec(url, **given)
    job = Job(engine="mine", model="smollm2_135m", prompt_tokens_requested=len(ids), protocol="warm",
              context_tokens_requested=1024, repeat=1, series_length=shots)  # fmt: skip
    ctx = job_context(tmp, job, engine=engine, output_tokens=output_tokens)
    ctx.build = engine.build(spec, cache_root(""), 1)
    ctx.settings = ServerSettings(threads=1, context_tokens=1024, engine_spec=spec)
    ctx.prompts = {"corpus": "fixed", "prompts": {f"{len(ids)}{v}": {"token_ids": ids} for v in "AB"}}
    return ctx


def run(ctx: JobContext) -> list[dict]:
    return run_job(ctx, JsonlJournal(ctx.log_dir.parent / "shots" / f"{ctx.job.job_id}.jsonl"))


# -- a stream that arrives in one read is not timed ------------------------------------------------


def test_a_direct_stream_is_timed_and_records_zero_drafts(plain, prompt_ids, tmp_path):
    records = run(attached_ctx(tmp_path, plain, prompt_ids, shots=2))
    assert [r["status"] for r in records] == ["ok", "ok"], [r["error"] for r in records]
    for record in records:
        assert 0 < record["ttft_s"] < record["e2e_s"] and record["decode_tok_s"] < 2000
        assert record["engine_draft_tokens"] == 0 and record["server_spec_draft_tokens_delta"] == 0


@contextlib.contextmanager
def busy_cores(n: int) -> Iterator[None]:
    """n processes spinning on the CPU: the client is descheduled now and then, as on a loaded host."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait(10)


# Each: the proxy's options, and whether the host is loaded meanwhile. A whole answer in one write
# (as one chunk, or one chunk per event), in two writes 5 ms apart, and passed on every 4 KiB.
BUFFERING = {
    "one": (["--buffer", "one"], False),
    "per-event": (["--buffer", "per-event"], False),
    "one, host under load": (["--buffer", "one"], True),
    "two pieces": (["--buffer", "two"], False),
    "every 4 KiB": (["--flush-bytes", "4096"], False),
}


@pytest.mark.parametrize("buffering", list(BUFFERING))
def test_a_stream_a_proxy_buffers_is_refused_in_one_line(plain, prompt_ids, tmp_path, buffering):
    options, loaded = BUFFERING[buffering]
    with proxy(plain, tmp_path, *options) as url, busy_cores(2) if loaded else contextlib.nullcontext():
        records = run(attached_ctx(tmp_path, url, prompt_ids, shots=3, output_tokens=64))
    assert [r["status"] for r in records] == ["failed"] * 3, [r["error"] for r in records]
    for record in records:
        assert record["error"].startswith("StreamNotTimed: ") and "\n" not in record["error"]
        assert "buffered the stream" in record["error"] and record["ttft_s"] is None
        assert record["decode_tok_s"] is None and record["engine_died"] is False


@contextlib.contextmanager
def namespaced_link(tag: int) -> Iterator[tuple[str, str]]:
    """A network namespace behind a 100 Mbit/s veth link (tc tbf both ways): (its name, its address)."""
    ns, host_if, ns_if = f"ws51n{tag}", f"ws51h{tag}", f"ws51p{tag}"
    subnet = f"10.251.{tag % 250}"
    setup = [
        ["ip", "netns", "add", ns],
        ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
        ["ip", "link", "set", ns_if, "netns", ns],
        ["ip", "addr", "add", f"{subnet}.1/30", "dev", host_if],
        ["ip", "link", "set", host_if, "up"],
        ["ip", "netns", "exec", ns, "ip", "addr", "add", f"{subnet}.2/30", "dev", ns_if],
        ["ip", "netns", "exec", ns, "ip", "link", "set", ns_if, "up"],
        ["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"],
        [
            "tc",
            "qdisc",
            "add",
            "dev",
            host_if,
            "root",
            "tbf",
            "rate",
            "100mbit",
            "burst",
            "32kbit",
            "latency",
            "50ms",
        ],
        [
            "ip",
            "netns",
            "exec",
            ns,
            "tc",
            "qdisc",
            "add",
            "dev",
            ns_if,
            "root",
            "tbf",
            "rate",
            "100mbit",
            "burst",
            "32kbit",
            "latency",
            "50ms",
        ],
    ]
    try:
        for argv in setup:
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"no network namespace here ({' '.join(argv[:3])}: {done.stderr.strip()})")
        yield ns, f"{subnet}.2"
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)


def test_a_stream_buffered_whole_across_a_100_mbit_link_is_refused(
    llama_server_binary,  # noqa: F811 -- the module fixtures imported above
    model_path,  # noqa: F811
    prompt_ids,
    tmp_path,
):
    """The issue's case: a proxy that holds the whole answer, reached over a slower link (its bytes
    come in several reads that wait), once stored ok at 78,000-103,000 tok/s."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        pytest.skip("no ip or tc command here: the namespaced link cannot be made")
    with namespaced_link(os.getpid() % 10000) as (ns, address):
        server_port, proxy_port = free_port(), free_port()
        argv = [
            llama_server_binary,
            "--model",
            str(model_path),
            "--host",
            LOOPBACK,
            "--port",
            str(server_port),
            "--threads",
            "1",
            "--ctx-size",
            "1024",
            "--parallel",
            "1",
            "--no-webui",
            "--metrics",
        ]
        inside = ["ip", "netns", "exec", ns]
        with open(tmp_path / "ns-server.log", "ab") as log:
            server = subprocess.Popen([*inside, *argv], stdout=log, stderr=subprocess.STDOUT)
        proxy_argv = [
            *inside,
            sys.executable,
            str(PROXY),
            str(proxy_port),
            f"http://{LOOPBACK}:{server_port}",
            "--buffer",
            "one",
            "--bind",
            address,
        ]
        with open(tmp_path / "ns-proxy.log", "ab") as log:
            front = subprocess.Popen(proxy_argv, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://{address}:{proxy_port}"
        try:
            deadline = time.monotonic() + 120
            while not http_ok(f"{url}/health"):
                assert time.monotonic() < deadline and server.poll() is None, (
                    tmp_path / "ns-server.log"
                ).read_text()
                time.sleep(0.2)
            records = run(attached_ctx(tmp_path, url, prompt_ids, shots=3, output_tokens=256))
        finally:
            for process in (front, server):
                process.terminate()
                process.wait(30)
    assert [r["status"] for r in records] == ["failed"] * 3, [r["error"] for r in records]
    assert all(r["error"].startswith("StreamNotTimed: ") for r in records)


def test_a_stream_passed_on_as_it_comes_is_timed_and_counts_its_deliveries(plain, prompt_ids, tmp_path):
    with proxy(plain, tmp_path) as url:
        records = run(attached_ctx(tmp_path, url, prompt_ids, shots=2, output_tokens=64))
    assert [r["status"] for r in records] == ["ok", "ok"], [r["error"] for r in records]
    for record in records:  # a delivery per token or a few (a client on a loaded host falls behind)
        assert 16 < record["stream_token_deliveries"] <= record["stream_token_events"] == 64


def test_eight_tokens_per_event_are_timed_per_token_not_refused(tmp_path):
    """A drafting engine's events of 8 tokens each, 10 ms apart (a real HTTP stream), in a drafting
    mode: each token is timed by its event, so decode speed is the 24 tokens after the first event
    over its span (in the mode none such events are refused: test_timing)."""
    engine = FakeEngine(["eight_per_event"])
    no_build = RealEngine(engine, {"build_id": "none"}, tmp_path / "no-model.gguf", NO_MODEL)
    job = Job(engine="llama_cpp", model="m", prompt_tokens_requested=32, protocol="warm",
              context_tokens_requested=512, repeat=1, series_length=2, spec_mode="ngram")  # fmt: skip
    records = run_job(job_context(tmp_path, job, engine=engine, output_tokens=32, real=no_build),
                      JsonlJournal(tmp_path / "shots" / f"{job.job_id}.jsonl"))  # fmt: skip
    for record in records:
        assert record["status"] == "ok", record["error"]
        assert record["output_tokens"] == 32 and record["decode_tokens"] == 24
        assert record["decode_tok_s"] == pytest.approx(24 / record["decode_span_s"])
        assert 8 / 0.05 < record["decode_tok_s"] <= 8 / 0.01 * 1.05  # 8 tokens per ~10 ms step


# -- an attached server that drafts, lists several models, restarts ---------------------------------


def test_a_none_shot_on_a_server_that_drafts_is_refused(
    llama_server_binary,  # noqa: F811 -- the module fixtures imported above
    model_path,  # noqa: F811
    prompt_ids,
    tmp_path,
):
    with users_server(llama_server_binary, model_path, tmp_path, NGRAM_ARGS) as url:
        records = run(attached_ctx(tmp_path, url, prompt_ids, shots=2, output_tokens=24))
    assert [r["status"] for r in records] == ["failed", "failed"]
    for record in records:
        assert record["error"].startswith(
            "DraftedWithoutMode: the engine drafted tokens in a shot of mode none ("
        )
        assert "by its timings' draft_n" in record["error"] and "\n" not in record["error"]


def test_a_server_listing_several_models_needs_model_name(plain, prompt_ids, tmp_path):
    served = requests.get(f"{plain}/v1/models", timeout=10).json()["data"][0]["id"]
    with proxy(plain, tmp_path, "--extra-model", "other-model") as url:
        with pytest.raises(WhichshotError) as caught:
            run(attached_ctx(tmp_path, url, prompt_ids, shots=1))
        assert str(caught.value) == (
            f"the server at {url} serves 2 models ({served}, other-model): name the one to measure in its "
            "engines entry's model_name"
        )
        records = run(attached_ctx(tmp_path / "named", url, prompt_ids, shots=2, model_name=served))
    assert [r["status"] for r in records] == ["ok", "ok"], [r["error"] for r in records]
    assert [r["engine_model_id"] for r in records] == [served, served]  # the id the answers named


def test_a_restart_between_shots_makes_the_next_shot_shot_one(
    llama_server_binary,  # noqa: F811 -- the module fixtures imported above
    model_path,  # noqa: F811
    prompt_ids,
    tmp_path,
):
    port = free_port()
    log = tmp_path / "server.log"
    servers = [start_server(llama_server_binary, model_path, log, port, [])]

    def restart_before_shot_2(position: int) -> None:
        if position == 2:
            servers[0].terminate()
            servers[0].wait(30)
            servers.append(start_server(llama_server_binary, model_path, log, port, []))
            servers.pop(0)

    ctx = attached_ctx(tmp_path, f"http://{LOOPBACK}:{port}", prompt_ids, shots=3)
    ctx = dataclasses.replace(ctx, progress=restart_before_shot_2)
    try:
        records = run(ctx)
    finally:
        for server in servers:
            server.terminate()
            server.wait(30)
    assert [r["status"] for r in records] == ["ok"] * 3, [r["error"] for r in records]
    assert [r["process_seq"] for r in records] == [1, 2, 2]
    assert [r["shot_index"] for r in records] == [1, 1, 2]  # never a warm shot of the fresh process
    marks = [r["engine_process_start_mark"] for r in records]
    assert marks[0].startswith("Process-Start-Time-Unix ") and marks[0] != marks[1] == marks[2]


# -- a server that wants an API key ----------------------------------------------------------------

API_KEY = "sk-whichshot-test-7f3a91c2"  # what a user's server was started with (--api-key)


def test_a_server_with_an_api_key_is_measured_and_the_key_is_written_nowhere(
    llama_server_binary,  # noqa: F811 -- the module fixtures imported above
    model_path,  # noqa: F811
    prompt_ids,
    tmp_path,
    monkeypatch,
):
    monkeypatch.setenv("MY_SERVER_KEY", API_KEY)
    with users_server(llama_server_binary, model_path, tmp_path, ["--api-key", API_KEY]) as url:
        without = requests.post(f"{url}/tokenize", json={"content": "x"}, timeout=10)
        assert without.status_code == 401  # the server does want the key
        ctx = attached_ctx(tmp_path, url, prompt_ids, shots=2, api_key_env="MY_SERVER_KEY")
        records = run(ctx)
        monkeypatch.delenv("MY_SERVER_KEY")
        with pytest.raises(WhichshotError) as unset:
            run(attached_ctx(tmp_path / "unset", url, prompt_ids, shots=1, api_key_env="MY_SERVER_KEY"))
    assert [r["status"] for r in records] == ["ok", "ok"], [r["error"] for r in records]
    assert ctx.build["server"]["api_key_env"] == "MY_SERVER_KEY"
    assert str(unset.value) == (
        "api_key_env names the environment variable MY_SERVER_KEY, which is not set (or empty) here: "
        "export MY_SERVER_KEY=<the server's API key> before running"
    )
    written = [p for p in tmp_path.rglob("*") if p.is_file() and API_KEY.encode() in p.read_bytes()]
    written = [p for p in written if not p.name.startswith("server-")]  # the server's own log, not ours
    assert written == [] and API_KEY not in repr(records) and API_KEY not in repr(ctx.build)


# -- third-party servers: no /tokenize, the chat template, the prompt cache -------------------------


def test_a_server_without_tokenize_is_named_in_one_line(plain, tmp_path):
    with proxy(plain, tmp_path, "--hide", "/tokenize") as url:
        engine = load_engine("openai")
        spec = attach_spec(url)
        settings = ServerSettings(threads=1, context_tokens=1024, engine_spec=spec)
        server = engine.start(
            engine.build(spec, cache_root(""), 1), Path("unused"), settings, tmp_path / "x.log"
        )
        with pytest.raises(WhichshotError) as caught:
            server.tokenize("Hello")
    message = str(caught.value)
    assert message.startswith(f"the server at {url} has no /tokenize of tokenizer_api llama_server (HTTP 404")
    assert "llama-cpp-python's own server (python -m llama_cpp.server) has neither" in message
    assert "\n" not in message


def test_chat_prefill_counts_the_templates_tokens(plain, prompt_ids, tmp_path):
    records = run(attached_ctx(tmp_path, plain, prompt_ids, shots=2, api="chat"))
    assert [r["status"] for r in records] == ["ok", "ok"], [r["error"] for r in records]
    for record in records:
        assert record["prefill_tokens"] == record["engine_prompt_tokens"] > record["prompt_tokens"]
        assert record["prefill_tok_s"] == pytest.approx(record["prefill_tokens"] / record["ttft_s"])


def test_warm_prefill_from_the_servers_prompt_cache_is_struck(plain, prompt_ids, tmp_path):
    records = run(attached_ctx(tmp_path, plain, prompt_ids, shots=4))
    assert [r["status"] for r in records] == ["ok"] * 4, [r["error"] for r in records]
    assert all(r["engine_cached_tokens"] > 0 for r in records[1:])  # the same prompt again: a cache read
    shots = upgrade_shots(pd.DataFrame(records))
    figures, caveats = compute_figures(shots, [], 0.7)
    frame = pd.DataFrame([f.as_row() for f in figures])
    warm = {r["metric"]: r for r in frame.to_dict("records") if r["cell_id"] and r["aggregation"] == "median"}
    assert "prompt_cache_hit" in list(warm["prefill_tok_s"]["caveat_ids"])
    assert "prompt_cache_hit" not in list(warm["decode_tok_s"]["caveat_ids"])
    html = render_report(frame, pd.DataFrame(caveats), shots, {"builds": [], "models": []}, [], "t")
    struck = [cell.split("</td>")[0] for cell in html.split('<td class="n apart" title="')[1:]]
    assert struck and all(c.startswith("cache hit: prompt read from the engine") for c in struck)
    assert any(warm["prefill_tok_s"]["figure_id"] in c for c in struck)
    assert not any(warm["decode_tok_s"]["figure_id"] in c for c in struck)
    plot = tok_s_by_shot_index(frame)  # the per-shot prefill points are crossed out too
    gids = {artist.get_gid() for axis in plot.axes for artist in axis.collections}
    assert "gated: cache hit" in gids


# -- a server on another host ------------------------------------------------------------------------


def test_what_counts_as_this_machine():
    assert all(
        map(is_this_machine, ["127.0.0.1", "127.0.0.2", "localhost", "::1", "0.0.0.0", "::ffff:127.0.0.1"])
    )
    assert all(is_this_machine(str(address)) for address in machine_addresses())  # its own LAN address
    # Documentation addresses (RFC 5737): never this machine's. Resolving a literal sends nothing.
    own = {str(a) for a in machine_addresses()}
    assert not any(is_this_machine(a) for a in ["198.51.100.7", "203.0.113.9"] if a not in own)


def test_a_server_on_another_host_has_no_telemetry_identity_or_threads(
    plain, prompt_ids, tmp_path, monkeypatch
):
    """The server runs here, but the test says its host is another (traffic stays on loopback)."""
    monkeypatch.setattr(engine_host_module, "is_this_machine", lambda host: False)
    ctx = attached_ctx(tmp_path, plain, prompt_ids, shots=2)
    shots_path, samples_path = tmp_path / "shots" / "s.jsonl", tmp_path / "telemetry" / "s.jsonl"
    series = run_series_with_telemetry(
        ctx, shots_path, samples_path, {"backends": ["linux"], "interval_s": 0.05}
    )
    records = series.records
    assert [r["status"] for r in records] == ["ok", "ok"], [r["error"] for r in records]
    for record in records:
        assert record["engine_on_this_machine"] is False and record["engine_host"] == LOOPBACK
        assert record["hostname"] == LOOPBACK and record["threads"] is None
        assert record["cpu_model"] is None and record["cpu_count"] is None and record["gpu_name"] is None
        assert record["cpu_freq_median_mhz"] is None and record["cpu_energy_j"] is None  # no sensor read
        assert (
            "every sensor: the engine runs on 127.0.0.1, not this machine" in record["telemetry_not_measured"]
        )
    _figures, caveats = compute_figures(upgrade_shots(pd.DataFrame(records)), [], 0.7)
    (found,) = [c for c in caveats if c["caveat_id"] == "engine_on_another_host"]
    assert found["figure_ids"] and set(found["shot_ids"]) == {r["shot_id"] for r in records}
