"""The engine's own benchmark tool (llama-bench) on the same work as a warm series, run right before
and right after it in the same job, so that its numbers and ours share the machine's state.

The same work: prefill of the series' prompt length from an empty context (pp at depth 0), and
decode of its output length after that prompt (tg at depth = prompt length), with the server's
threads, batch and micro-batch sizes, GPU layers and flash-attention setting (the engine's
bench_argv passes them). Each bracket's llama-bench rows keep every repetition's tok/s, so the
figures can tell noise (the spread) from a systematic difference."""

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from whichshot.engine.process import run_tied
from whichshot.measure.grid import Job
from whichshot.measure.protocol import JobContext, prompt_of
from whichshot.shots.axes import BASE_WORKLOAD, NO_DRAFT, ONE_STREAM

T = TypeVar("T")
# llama-bench's JSON gives flash attention as llama.cpp's enum value; the server's flag takes a name.
FLASH_ATTENTION_NAMES = {-1: "auto", 0: "off", 1: "on"}


@dataclass(frozen=True)
class BenchPlan:
    """What to run in each bracket: the tool's argv (model and server settings) and the work."""

    argv: tuple[str, ...]
    prompt_tokens: int
    output_tokens: int
    repetitions: int


def tool_unavailable(bench: dict[str, Any], has_bench: bool) -> str | None:
    """Why no series of this run calls the engine's benchmark tool (None: the tool may run)."""
    if not bench["enabled"]:
        return "bench.enabled is false"
    if not has_bench:
        return "the engine kind has no benchmark tool"
    return None


def not_benched_because(job: Job, bench: dict[str, Any], has_bench: bool) -> str | None:
    """Why this series gets no llama-bench brackets (None: it gets them). A series the tool does not
    compare with is asked nothing of the bench settings (measure.plan gives it none)."""
    return (
        not_comparable_because(job, "llama-bench")
        or tool_unavailable(bench, has_bench)
        or later_repeat_because(job, bench)
    )


def later_repeat_because(job: Job, bench: dict[str, Any]) -> str | None:
    """Why a later repeat of a cell runs no benchmark tool (bench.repeats: the first repeats alone)."""
    return repeat_left_out_because(job, bench, "bench", "run no benchmark tool")


def repeat_left_out_because(job: Job, settings: dict[str, Any], section: str, consequence: str) -> str | None:
    """Why a later repeat of a cell goes without a tool whose section's `repeats` keeps it to the
    first repeats (bench.repeats, bench.verify_probe.repeats; None: this repeat gets it)."""
    if settings.get("repeats") is not None and job.repeat > settings["repeats"]:
        return f"{section}.repeats is {settings['repeats']}: later repeats of the cell {consequence}"
    return None


def not_comparable_because(job: Job, tool: str) -> str | None:
    """Why another tool's timing of one warm request at a time does not compare with this series."""
    if job.protocol != "warm" or job.workload != BASE_WORKLOAD:
        return f"only warm series of the protocol grid are set against {tool} (it times warm runs)"
    if job.spec_mode != NO_DRAFT:
        return f"{tool} does not draft: only series without speculative decoding are compared"
    if job.parallel_streams != ONE_STREAM:
        return f"{tool} times one stream: series of parallel streams are not compared"
    return None


def plan_for(ctx: JobContext, bench: dict[str, Any]) -> tuple[BenchPlan | None, str | None]:
    """The brackets' plan for this series, or why it has none."""
    reason = not_benched_because(ctx.job, bench, ctx.engine.has_bench)
    if reason:
        return None, reason
    plan = BenchPlan(
        argv=tuple(ctx.engine.bench_argv(ctx.build, ctx.model_path, ctx.settings)),
        prompt_tokens=len(prompt_of(ctx, "A")["token_ids"]),
        output_tokens=ctx.output_tokens,
        repetitions=bench["repetitions"],
    )
    return plan, None


def bench_record(ctx: JobContext, plan: BenchPlan | None, reason: str | None, brackets: list) -> dict:
    """results/bench/{job}.json: the series' brackets, or why there are none."""
    return {
        "job_id": ctx.job.job_id,
        "engine": ctx.job.engine,
        "model": ctx.job.model,
        "build_id": ctx.build["build_id"],
        "model_sha256": ctx.model["sha256"],
        "not_run": reason,
        "work": None
        if plan is None
        else {
            "prompt_tokens": plan.prompt_tokens,
            "output_tokens": plan.output_tokens,
            "repetitions": plan.repetitions,
        },  # fmt: skip
        "brackets": brackets,
    }


def same_work_argvs(plan: BenchPlan) -> dict[str, list[str]]:
    """llama-bench argument lists: prefill at depth 0 and decode at the prompt's depth."""
    common = ["-r", str(plan.repetitions), "-o", "json"]
    return {
        "pp": [*plan.argv, "-p", str(plan.prompt_tokens), "-n", "0", "-d", "0", *common],
        "tg": [*plan.argv, "-p", "0", "-n", str(plan.output_tokens), "-d", str(plan.prompt_tokens), *common],
    }


def run_bracket(plan: BenchPlan, bracket: str) -> dict[str, Any]:
    """One bracket (before or after the series): both tests; a failure is recorded, not raised
    (the series' shots are the run's product; a missing cross-check is said in the report)."""
    t_start_s = time.monotonic()
    rows: list[dict[str, Any]] = []
    error = None
    for argv in same_work_argvs(plan).values():
        test_rows, error = run_bench(argv, expected_rows=1)
        if error:
            break
        rows += test_rows
    return {"bracket": bracket, "t_start_mono_s": t_start_s, "t_end_mono_s": time.monotonic(),
            "argvs": same_work_argvs(plan), "rows": rows, "error": error}  # fmt: skip


def bracketed(plan: BenchPlan | None, series: Callable[[], T]) -> tuple[T, list[dict[str, Any]]]:
    """Run the series between two brackets of llama-bench (none without a plan)."""
    if plan is None:
        return series(), []
    before = run_bracket(plan, "before")
    result = series()
    return result, [before, run_bracket(plan, "after")]


def run_bench(argv: list[str], expected_rows: int) -> tuple[list[dict[str, Any]], str | None]:
    """llama-bench's rows for one command (expected_rows of them), or why there are none: the error
    it ended with (its last stderr line), or what in its output is not what whichshot reads. A
    failure is recorded by the caller as not measured, never raised: the shots are the product."""
    result = run_tied(argv)  # dies with the harness, as the engine does
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return [], f"llama-bench failed (exit {result.returncode}): {tail}"
    try:
        rows = parse_bench_json(result.stdout)
    except BenchOutputUnexpected as exc:
        return [], f"llama-bench's output is not what whichshot reads: {exc}"
    if len(rows) != expected_rows:
        return [], f"llama-bench gave {len(rows)} result row(s) where this command asks for {expected_rows}"
    return rows, None


class BenchOutputUnexpected(ValueError):
    """llama-bench printed something other than its JSON rows (a changed format, a warning on stdout)."""


# The row keys read (llama-bench -o json), with the type each must have.
_NUMBER = (int, float)
_REQUIRED = {"n_prompt": int, "n_gen": int, "avg_ts": _NUMBER, "stddev_ts": _NUMBER}


def parse_bench_json(text: str) -> list[dict[str, Any]]:
    """llama-bench -o json rows, reduced to the test, its settings and every repetition's tok/s;
    BenchOutputUnexpected (one line) where the text is not such rows."""
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchOutputUnexpected(f"not JSON ({exc.msg} at char {exc.pos}): {_start(text)}") from None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise BenchOutputUnexpected(f"not a list of result objects: {_start(text)}")
    for index, row in enumerate(rows):
        _check_row(index, row)
    return [
        {
            "test": "pp" if row["n_gen"] == 0 else "tg",
            "n_prompt": row["n_prompt"],
            "n_gen": row["n_gen"],
            "n_depth": row.get("n_depth", 0),
            "avg_tok_s": row["avg_ts"],
            "std_tok_s": row["stddev_ts"],
            "samples_tok_s": row.get("samples_ts", []),
            "repetitions": len(row.get("samples_ts", [])),
            "n_threads": row.get("n_threads"),
            "n_batch": row.get("n_batch"),
            "n_ubatch": row.get("n_ubatch"),
            "n_gpu_layers": row.get("n_gpu_layers"),
            "flash_attn": row.get("flash_attn"),  # llama.cpp's enum value: FLASH_ATTENTION_NAMES
            "type_k": row.get("type_k"),
            "build_commit": row.get("build_commit"),
        }
        for row in rows
    ]


def _check_row(index: int, row: dict[str, Any]) -> None:
    for key, kind in _REQUIRED.items():
        if key not in row:
            raise BenchOutputUnexpected(f"row {index + 1} has no {key!r}")
        if not isinstance(row[key], kind) or isinstance(row[key], bool):
            raise BenchOutputUnexpected(f"row {index + 1}: {key!r} is {row[key]!r}, not a number")
    samples = row.get("samples_ts", [])
    if not isinstance(samples, list) or not all(isinstance(s, _NUMBER) for s in samples):
        raise BenchOutputUnexpected(f"row {index + 1}: 'samples_ts' is not a list of numbers")


def _start(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")
