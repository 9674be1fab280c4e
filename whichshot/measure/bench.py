"""Cross-check with the engine's own benchmark tool (llama-bench) on the same build and model."""

import json
import subprocess
from typing import Any

from whichshot.errors import WhichshotError


def run_engine_bench(
    argv: list[str], lengths: list[int], output_tokens: int, repetitions: int, threads: int
) -> list[dict[str, Any]]:
    """Run llama-bench for prefill at each length and decode of `output_tokens`; parse its JSON."""
    full = [
        *argv,
        "-p", ",".join(str(n) for n in lengths),
        "-n", str(output_tokens),
        "-r", str(repetitions),
        "-t", str(threads),
    ]  # fmt: skip
    result = subprocess.run(full, capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise WhichshotError(f"llama-bench failed (exit {result.returncode}): {tail}")
    return parse_bench_json(result.stdout)


def parse_bench_json(text: str) -> list[dict[str, Any]]:
    """llama-bench -o json rows, reduced to the test and its mean/std tok/s."""
    rows = json.loads(text)
    return [
        {
            "test": "pp" if row["n_gen"] == 0 else "tg",
            "n_prompt": row["n_prompt"],
            "n_gen": row["n_gen"],
            "avg_tok_s": row["avg_ts"],
            "std_tok_s": row["stddev_ts"],
            "repetitions": len(row.get("samples_ts", [])),
            "build_commit": row.get("build_commit"),
            "n_threads": row.get("n_threads"),
        }
        for row in rows
    ]
