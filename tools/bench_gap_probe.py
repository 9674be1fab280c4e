"""Where does llama-server lose time against llama-bench on the same work?

Interleaves, in rounds, llama-bench (pp at depth 0 and tg at the prompt's depth, with the same
threads, batch and micro-batch sizes, flash attention) with warm llama-server shots timed by the
server itself (timings.prompt_per_second, predicted_per_second), under variants that each remove
one suspect: our telemetry sampler running beside the engine, the server's debug logging
(--log-verbosity 4), a fully booked CPU (threads 1 on both tools leaves one core free for the
server's HTTP thread, our client and everything else). Prints one JSON line per round and a
summary line per variant and test: the median server/bench ratio and its range over rounds.

Usage: python tools/bench_gap_probe.py BUILD_DIR MODEL.gguf [--prompt-tokens 256] [--rounds 5]
  BUILD_DIR: ~/.cache/whichshot/engines/llama_cpp-<build id> (holds build.json)
"""

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engines.llama_cpp import ENGINE, LlamaServer, server_argv  # noqa: E402
from whichshot.engine.base import ServerSettings, ShotRequest  # noqa: E402
from whichshot.engine.process import LOOPBACK, free_port, start_until_ready  # noqa: E402
from whichshot.measure.bench import BenchPlan, run_bracket  # noqa: E402
from whichshot.telemetry import TelemetryRecorder, close_backends, open_backends  # noqa: E402

VARIANTS = {
    # name: (threads, our telemetry sampler on, server debug log on)
    "as_pipeline": (2, True, True),
    "no_telemetry": (2, False, True),
    "no_debug_log": (2, True, False),
    "bare": (2, False, False),
    "one_thread": (1, True, True),
}
SHOTS_PER_ROUND = 3
OUTPUT_TOKENS = 64
TEXT_SOURCE = Path(statistics.__file__)  # real text every Python install ships


@contextlib.contextmanager
def server(
    build: dict, model: Path, settings: ServerSettings, debug_log: bool, log: Path
) -> Iterator[LlamaServer]:
    port = free_port()
    argv = server_argv(build["binaries"]["llama-server"]["path"], model, settings, port)
    if not debug_log:
        at = argv.index("--log-verbosity")
        argv = argv[:at] + argv[at + 2 :]
    base_url = f"http://{LOOPBACK}:{port}"
    process, ready_s = start_until_ready(argv, log, f"{base_url}/health", settings.ready_timeout_s)
    running = LlamaServer(process, base_url, ready_s)
    try:
        yield running
    finally:
        running.stop()


@contextlib.contextmanager
def sampler(on: bool) -> Iterator[None]:
    if not on:
        yield
        return
    backends, _caveats, _gpus = open_backends(["auto"])
    recorder = TelemetryRecorder(backends, interval_s=0.25)
    with recorder:
        yield
    close_backends(backends)


def server_speeds(running: LlamaServer, prompt: list[int]) -> dict[str, list[float]]:
    """Prefill and decode tok/s by the server's own timings over warm shots (one unmeasured first)."""
    request = ShotRequest(prompt, max_output_tokens=OUTPUT_TOKENS, ignore_eos=True, timeout_s=300)
    running.shot(request)
    timings = [running.shot(request).engine_timings for _ in range(SHOTS_PER_ROUND)]
    return {
        "pp": [t["prompt_per_second"] for t in timings],
        "tg": [t["predicted_per_second"] for t in timings],
    }


def bench_speeds(
    build: dict, model: Path, settings: ServerSettings, prompt_tokens: int
) -> dict[str, list[float]]:
    argv = ENGINE.bench_argv(build, model, settings)
    plan = BenchPlan(tuple(argv), prompt_tokens, OUTPUT_TOKENS, repetitions=SHOTS_PER_ROUND)
    bracket = run_bracket(plan, "probe")
    if bracket["error"]:
        raise SystemExit(bracket["error"])
    return {row["test"]: row["samples_tok_s"] for row in bracket["rows"]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("model", type=Path)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    build = json.loads((args.build_dir / "build.json").read_text())
    ratios: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as logs:
        for round_no in range(1, args.rounds + 1):
            for name in args.variants.split(","):
                threads, telemetry_on, debug_log = VARIANTS[name]
                settings = ServerSettings(threads=threads, context_tokens=2048, ready_timeout_s=120)
                log = Path(logs) / f"{name}-{round_no}.log"
                with server(build, args.model, settings, debug_log, log) as running, sampler(telemetry_on):
                    words = TEXT_SOURCE.read_text()
                    prompt = running.tokenize(words)[: args.prompt_tokens]
                    ours = server_speeds(running, prompt)
                theirs = bench_speeds(build, args.model, settings, args.prompt_tokens)
                for test in ("pp", "tg"):
                    ratio = statistics.median(ours[test]) / statistics.fmean(theirs[test])
                    ratios.setdefault((name, test), []).append(ratio)
                    line = {"round": round_no, "variant": name, "test": test, "server_tok_s": ours[test]}
                    print(
                        json.dumps({**line, "bench_tok_s": theirs[test], "ratio": round(ratio, 4)}),
                        flush=True,
                    )
    for (name, test), values in ratios.items():
        spread = {"min_ratio": round(min(values), 4), "max_ratio": round(max(values), 4)}
        summary = {"variant": name, "test": test, "rounds": len(values)}
        print(json.dumps({**summary, "median_ratio": round(statistics.median(values), 4), **spread}))


if __name__ == "__main__":
    main()
