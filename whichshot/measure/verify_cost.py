"""What a verification step costs the engine here: the time to process a batch of k+1 tokens (the
last sampled token and k drafted ones) against one token, at the depth the drafted series decoded
at. Measured with the engine's benchmark tool right after the drafted series, in the same job,
under the same measurement lock, so it reads the machine the series ran on.

Why: the same acceptance gives a large speed-up where a wide batch costs little more than one token
(compute to spare while decode waits on memory) and a small one where it costs almost k+1 times as
much. figures/speedup_model_figures.py predicts each drafted cell's speed-up from its counts and
this ratio.

A prompt batch of the tool (llama-bench pp at a depth) computes the output head for its last token
only; a verification step needs the logits of every token of the batch, and for a small model with
a large vocabulary the head is a large share of the work (Qwen2.5's 151,936 x 896). `-embd 1` makes
the tool output every token of the batch, as a verification step does. What the tool leaves out
(the server's sampling of each position, its draft lookup) is left to the prediction's residual."""

import statistics
import time
from dataclasses import dataclass
from typing import Any

from whichshot.measure.bench import later_repeat_because, run_bench, tool_unavailable
from whichshot.measure.grid import Job
from whichshot.measure.protocol import JobContext
from whichshot.shots.axes import NO_DRAFT

ONE_TOKEN = 1
DRAFTS_NOTHING = "the series drafts nothing"  # why a no-draft series gets no probe
NO_DRAFT_CAP = "no ok shot with a known draft cap (spec_draft_cap_tokens) to size the probe"
EVERY_TOKEN_OUT = ("-embd", "1")  # every token of the batch is an output, so its logits are computed


@dataclass(frozen=True)
class VerifyPlan:
    """The tool's argv (model and server settings), the batch widths and the depth to time them at."""

    argv: tuple[str, ...]
    widths: tuple[int, ...]
    depth_tokens: int
    repetitions: int

    def command(self) -> list[str]:
        widths = ",".join(str(w) for w in self.widths)
        return [*self.argv, "-p", widths, "-n", "0", "-d", str(self.depth_tokens), *EVERY_TOKEN_OUT,
                "-r", str(self.repetitions), "-o", "json"]  # fmt: skip


def verify_plan(
    ctx: JobContext, records: list[dict[str, Any]], bench: dict[str, Any]
) -> tuple[VerifyPlan | None, str | None]:
    """The probe's plan for a drafted series that just ran, or why it gets none."""
    shape, reason = drafted_shape(records, _not_probed_because(ctx, bench))
    if shape is None:
        return None, reason
    cap, depth = shape
    return VerifyPlan(
        argv=tuple(ctx.engine.bench_argv(ctx.build, ctx.model_path, ctx.settings)),
        widths=(ONE_TOKEN, cap + 1),
        depth_tokens=depth,
        repetitions=bench["repetitions"],
    ), None


def drafted_shape(
    records: list[dict[str, Any]], refused_because: str | None
) -> tuple[tuple[int, int] | None, str | None]:
    """A drafted series' draft cap and the depth it decoded at (decode_depth) over its ok shots, to
    size a probe; else why there is no probe (the reason given, or no ok shot saying one cap)."""
    if refused_because:
        return None, refused_because
    ok = [r for r in records if r.get("status") == "ok" and r.get("output_tokens")]
    caps = {r.get("spec_draft_cap_tokens") for r in ok} - {None}
    if not ok or len(caps) != 1:
        return None, NO_DRAFT_CAP
    return (int(caps.pop()), decode_depth(ok)), None


def _not_probed_because(ctx: JobContext, bench: dict[str, Any]) -> str | None:
    return (
        not_probed_because(ctx.job)
        or tool_unavailable(bench, ctx.engine.has_bench)
        or later_repeat_because(ctx.job, bench)
    )


def not_probed_because(job: Job) -> str | None:
    """Why a series gets no probe whatever the bench settings (None: it does where the tool runs)."""
    return DRAFTS_NOTHING if job.spec_mode == NO_DRAFT else None


def decode_depth(records: list[dict[str, Any]]) -> int:
    """The context a series decoded at, mid-answer: the median over shots of prompt + output / 2."""
    return round(statistics.median(r["prompt_tokens"] + r["output_tokens"] / 2 for r in records))


def run_verify_probe(plan: VerifyPlan | None, reason: str | None) -> dict[str, Any]:
    """The probe's record for bench.json: its plan, the tool's rows, or why there are none (a failed
    run is recorded, not raised: the series' shots are the job's product)."""
    if plan is None:
        return {"not_run": reason}
    t_start_s = time.monotonic()
    rows, error = run_bench(plan.command(), expected_rows=len(plan.widths))  # a row per width
    return {"not_run": None, "argv": plan.command(), "depth_tokens": plan.depth_tokens,
            "widths": list(plan.widths), "rows": rows, "error": error,
            "t_start_mono_s": t_start_s, "t_end_mono_s": time.monotonic()}  # fmt: skip
