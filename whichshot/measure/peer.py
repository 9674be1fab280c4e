"""A peer's client as a cross-check: llama-benchy (another project's OpenAI benchmark client) against
a server we start with the series' settings, right after a warm series, on comparable work.

The work: --pp our prompt length, --tg our output budget with --exact-tg (EOS ignored, as in our base
workload), depth 0, one request at a time, its warm-up run then its runs. Its prompts are cut at
random offsets from our own prompt text (the series' prompts, detokenized by the server and served
to it on loopback as its --book-url), counted by the model's own tokenizer (read from the GGUF by
transformers), and sent to /v1/chat/completions, so the chat template wraps them; it shortens the
text by the template's tokens it saw in its warm-up (--adapt-prompt, its default).

Its definitions, from its source (llama_benchy/results.py, 0.4.0): e2e_ttft is request sent to the
first stream chunk with content; tg t/s is tokens after the first content chunk over the time from
it to the last one. With --latency-mode none, pp t/s is prompt tokens over the time to the first
chunk of any kind. The record keeps its JSON as it wrote it, its output's tail and the numbers
parsed from it; a failure is recorded, never raised (the series' shots are the run's product)."""

import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whichshot.engine.process import LOOPBACK, run_tied
from whichshot.measure.bench import not_comparable_because
from whichshot.measure.protocol import JobContext, prompt_of

TOOL = "llama-benchy"
OUTPUT_TAIL_CHARS = 4000


@dataclass(frozen=True)
class PeerPlan:
    """The peer's executable and the work it is given."""

    tool: str
    prompt_tokens: int
    output_tokens: int
    runs: int
    timeout_s: float  # the whole run, its warm-up included: past it the peer is stopped


def find_tool(peer: dict[str, Any]) -> str | None:
    """The peer's executable: peer.command if set, else llama-benchy beside our Python, else on PATH."""
    if peer.get("command"):
        return shutil.which(peer["command"])
    beside = Path(sys.executable).parent / TOOL
    return str(beside) if beside.exists() else shutil.which(TOOL)


def not_peered_because(ctx: JobContext, peer: dict[str, Any] | None) -> str | None:
    """Why the peer is not set against this series (None: it is). A series it does not compare
    with is asked nothing of its settings (measure.plan gives it none)."""
    not_comparable = not_comparable_because(ctx.job, TOOL)  # the series llama-bench is set against too
    if not_comparable:
        return not_comparable
    return "bench.peer_client.enabled is false" if not peer or not peer["enabled"] else None


def peer_argv(
    plan: PeerPlan, base_url: str, model: str, tokenizer: Path, book_url: str, out: Path
) -> list[str]:
    """llama-benchy's argument list: our work, our text, the model's tokenizer, JSON to a file."""
    return [
        plan.tool,
        "--base-url", f"{base_url}/v1",
        "--model", model,
        "--tokenizer", str(tokenizer),
        "--book-url", book_url,
        "--pp", str(plan.prompt_tokens),
        "--tg", str(plan.output_tokens),
        "--exact-tg",
        "--depth", "0",
        "--concurrency", "1",
        "--runs", str(plan.runs),
        "--latency-mode", "none",  # est_ppt is then its time to first response, undiminished
        "--skip-coherence",  # a question about Paris: a speed check, not the model's wits
        "--format", "json",
        "--save-result", str(out),
    ]  # fmt: skip


def gguf_tokenizer(model_path: Path, out_dir: Path) -> Path:
    """The model's tokenizer as a tokenizer.json, converted from the GGUF by transformers (the peer
    counts and cuts its prompts with it; a GGUF holds no tokenizer.json of its own)."""
    from transformers import AutoTokenizer  # slow to import; only a peer run needs it

    tokenizer = AutoTokenizer.from_pretrained(str(model_path.parent), gguf_file=model_path.name)
    tokenizer.save_pretrained(str(out_dir))
    return out_dir / "tokenizer.json"


@contextmanager
def served_text(text: str) -> Iterator[str]:
    """The text at a loopback URL for as long as the block runs (the peer downloads its corpus)."""
    body = text.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer((LOOPBACK, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{LOOPBACK}:{server.server_address[1]}/corpus.txt"
    finally:
        server.shutdown()
        server.server_close()


def corpus_text(ctx: JobContext, server: Any) -> str:
    """The series' own prompt text (every variant of its length: all its prompts file holds), as the
    server detokenizes it."""
    prompts = ctx.prompts["prompts"]
    return "\n\n".join(server.detokenize(prompts[k]["token_ids"]) for k in sorted(prompts))


def run_peer(ctx: JobContext, plan: PeerPlan) -> dict[str, Any]:
    """Start a server as the series did, run the peer against it, stop it; the peer's record. Its
    JSON and the server's log stay in the series' log folder (peer/); the tokenizer and its HOME
    are scratch."""
    t_start_s = time.monotonic()
    log_dir = ctx.log_dir / "peer"
    log_dir.mkdir(parents=True, exist_ok=True)
    out = log_dir / "llama-benchy.json"
    out.unlink(missing_ok=True)  # an earlier attempt's
    record: dict[str, Any] = {"tool": TOOL, "argv": None, "error": None}
    with tempfile.TemporaryDirectory(prefix="whichshot-peer-") as scratch:
        try:
            tokenizer = gguf_tokenizer(ctx.model_path, Path(scratch) / "tokenizer")
        except Exception as exc:  # a model without a vocabulary (synthetic weights), or no transformers
            return {**record, "error": f"no tokenizer for the peer: {type(exc).__name__}: {exc}"}
        server = ctx.engine.start(ctx.build, ctx.model_path, ctx.settings, log_dir / "server.log")
        try:
            base_url = getattr(server, "base_url", None)
            if base_url is None:
                return {**record, "error": "the engine's server has no HTTP address for the peer"}
            with served_text(corpus_text(ctx, server)) as book_url:
                argv = peer_argv(plan, base_url, ctx.job.model, tokenizer, book_url, out)
                # Its corpus cache goes to HOME; offline: every name it could fetch is given as a file.
                env = {**os.environ, "HOME": scratch, "HF_HUB_OFFLINE": "1"}
                result = run_tied(argv, env=env, timeout_s=plan.timeout_s)
        finally:
            server.stop()
    t_end_s = time.monotonic()
    record = {**record, "argv": argv, "exit_code": result.returncode,
              "output_tail": (result.stdout + result.stderr)[-OUTPUT_TAIL_CHARS:],
              "t_start_mono_s": t_start_s, "t_end_mono_s": t_end_s,
              "wall_s": round(t_end_s - t_start_s, 1)}  # fmt: skip
    if not out.exists():
        tail = (result.stderr.strip().splitlines() or result.stdout.strip().splitlines() or ["no output"])[-1]
        return {**record, "error": f"{TOOL} wrote no result (exit {result.returncode}): {tail}"}
    raw = json.loads(out.read_text())
    return {**record, "raw": raw, "parsed": parse_peer_json(raw)}


def parse_peer_json(raw: dict[str, Any]) -> dict[str, Any]:
    """llama-benchy's JSON (--format json) reduced to one request at a time at depth 0: every run's
    end-to-end TTFT (s), decode and prefill tok/s, and the work it names."""
    runs = [r for r in raw["benchmarks"] if r["concurrency"] == 1 and r["context_size"] == 0]
    if len(runs) != 1 or runs[0]["is_context_prefill_phase"]:
        raise ValueError(f"expected one test at depth 0, one request at a time; got {len(runs)}")
    run = runs[0]

    def values(name: str, scale: float = 1.0) -> list[float]:
        metric = run.get(name)
        return [v * scale for v in metric["values"]] if metric else []

    return {
        "version": raw["version"],
        "latency_mode": raw["latency_mode"],
        "latency_ms": raw["latency_ms"],
        "prompt_tokens": run["prompt_size"],
        "output_tokens": run["response_size"],
        "e2e_ttft_s": values("e2e_ttft", 1e-3),
        "ttfr_s": values("ttfr", 1e-3),
        "decode_tok_s": values("tg_throughput"),
        "prefill_tok_s": values("pp_throughput"),
    }


def peer_record(applies: bool, reason: str | None, plan: PeerPlan | None, run: dict | None) -> dict[str, Any]:
    """The peer_client entry of results/bench/{job}.json: whether the peer is set against this
    series, its run, or why there is none (applies and no run: its figures are not measured)."""
    work = None
    if plan is not None:
        work = {"prompt_tokens": plan.prompt_tokens, "output_tokens": plan.output_tokens, "runs": plan.runs}
    return {"tool": TOOL, "applies": applies, "not_run": reason, "work": work, "run": run}


def peer_step(ctx: JobContext, peer: dict[str, Any] | None) -> dict[str, Any]:
    """Plan and run the peer for this series (bench.peer_client; None: off); its record either way."""
    reason = not_peered_because(ctx, peer)
    if reason:
        return peer_record(False, reason, None, None)
    tool = find_tool(peer)
    if tool is None:
        return peer_record(True, f"{TOOL} is not installed (pip install '.[peer]')", None, None)
    prompt_tokens = len(prompt_of(ctx, "A")["token_ids"])
    plan = PeerPlan(tool, prompt_tokens, ctx.output_tokens, peer["runs"], peer["timeout_s"])
    try:
        run = run_peer(ctx, plan)
    except Exception as exc:  # a cross-check's failure is told in the report, not raised
        run = {"tool": TOOL, "error": f"{type(exc).__name__}: {exc}"}
    return peer_record(True, None, plan, run)
