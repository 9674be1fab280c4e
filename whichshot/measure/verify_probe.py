"""What a verification step costs on the server itself (issue 45): each step of a request timed by
the engine's own clock, at verify widths the drafted series' speed-up depends on.

Why: llama-bench (measure/verify_cost.py) times a batch's forward pass alone. A server's verification
step also samples every position it checks (a full-vocabulary distribution, on the host), emits every
token it accepts and runs the drafter. On a GPU a forward step is short and those costs per token are a
large part of it: a cost model on llama-bench alone over-predicted every drafted cell of
results/reference/h100/speedup_model.

How: right after a drafted series, in its job (under the measurement lock, on the machine as the
series left it), two servers start with the series' build, model and settings, their drafting
replaced by the engine's forced acceptance (Engine.forced_acceptance_args): copy drafts of up to the
series' draft cap, every draft token accepted (ACCEPT_ALL), or none (ACCEPT_NONE). Each prompt is
real text (the standard library's documentation, tokenized by the server) to the series' mid-answer
depth whose last TAIL_BLOCKS x P tokens repeat a block of P distinct tokens: each step then drafts
P - 1 tokens and verifies P positions (verify width P), and emits P tokens (all accepted) or 1 (none);
a block of ONE_TOKEN_WIDTH drafts nothing (the one-token step). Each request runs `steps` decode steps
(fewer where the context holds no more, at least MIN_POINT_STEPS), each timed by the server itself
(step_readings), and gives its median steady step (measure/probe_steps.py): on a GPU a step is a few
milliseconds and one request's host jitter moves a step of its own by a tenth, tens of them hardly.
Each prompt is warmed up until its step time settles and then timed until its last `repetitions`
requests spread at most the limit, each up to a cap (measure/settle.py); the record keeps every
reading, the spread and the counts, so figures/speedup_model_figures.py derives the steps and the
cost model from the files. A third server runs the series' own drafting (SERIES_DRAFTER) on real
text, a stretch of its own per request: its steps that drafted nothing are the plain step with the
drafter's lookup in it, the host-side cost of drafting that a step pays whether or not it drafts.
A failure is recorded, never raised: the series' shots are the job's product."""

import dataclasses
import os
import time
from dataclasses import dataclass
from typing import Any

from whichshot.measure.bench import repeat_left_out_because
from whichshot.measure.host_load import HostLoad
from whichshot.measure.probe_steps import (
    ACCEPT_ALL,
    ACCEPT_NONE,
    MIN_STEADY_STEPS,
    ONE_TOKEN_WIDTH,
    steady_median_ms,
)
from whichshot.measure.protocol import JobContext
from whichshot.measure.settle import RepeatRule, repeat_until_steady
from whichshot.measure.verify_cost import drafted_shape, not_probed_because
from whichshot.prepare.corpus import pydoc_topics_text
from whichshot.shots.axes import ONE_STREAM

MIN_WIDTH = 4  # the forced acceptance drafts P - 1 tokens for P of 4 and more (Engine protocol)
# The block repeats this often at the prompt's end: a small model continues a repeat it has seen
# four times, so the drafts go on (a step that drafted otherwise is not counted).
TAIL_BLOCKS = 4
# The series' own drafting on real text: its steps that drafted nothing (after a step of one token)
# are plain steps with the drafter's lookup in them, as the series pays them.
SERIES_DRAFTER = "series_drafter"
# A request's steps where the context is short: the first step of a point that accepts drafts
# follows the first token (one token) and is not steady.
MIN_POINT_STEPS = MIN_STEADY_STEPS + 1
TEXT_CHARS_PER_TOKEN = 8  # text tokenized for the prompts: more than enough for their depth


@dataclass(frozen=True)
class ProbePlan:
    """The probe of one drafted series: its depth, the draft cap its servers draft up to, the verify
    widths (block lengths) it times, how many steps a request runs (at most; the context may hold
    fewer) and how it repeats them (measure/settle.py)."""

    depth_tokens: int
    draft_cap: int
    widths: tuple[int, ...]
    repetitions: int
    steps: int
    max_repetitions: int = 0  # 0: `repetitions`, no more
    max_warm_ups: int = 2
    settle_factor: float = 1.05
    context_tokens: int | None = None  # None: no limit on a request's steps

    def rule(self) -> RepeatRule:
        return RepeatRule(self.repetitions, self.max_repetitions, self.max_warm_ups, self.settle_factor)

    def most_requests(self) -> int:
        return self.max_warm_ups + max(self.repetitions, self.max_repetitions)

    def points(self) -> list[tuple[str, int]]:
        """(server, width) of every prompt, in the order they run: the one-token step first, the
        series' own drafter's plain step last."""
        return [(ACCEPT_NONE, ONE_TOKEN_WIDTH), *((ACCEPT_NONE, w) for w in self.widths),
                *((ACCEPT_ALL, w) for w in self.widths), (SERIES_DRAFTER, ONE_TOKEN_WIDTH)]  # fmt: skip

    def steps_at(self, server: str, width: int) -> int:
        """A request's steps at the point: `steps`, or as many as the context holds."""
        if self.context_tokens is None:
            return self.steps
        room = self.context_tokens - prompt_length(self.depth_tokens, width) - 1 - width
        return min(self.steps, room // _per_step(server, width) - 2)

    def output_tokens(self, server: str, width: int, steps: int | None = None) -> int:
        """A request's token budget: its steps and a margin, so that no draft is cut short by the
        budget's end (the server drafts at most the tokens left - 1)."""
        steps = self.steps_at(server, width) if steps is None else steps
        return 1 + (steps + 2) * _per_step(server, width) + width


def _per_step(server: str, width: int) -> int:
    return width if server == ACCEPT_ALL else 1


def probe_plan(
    ctx: JobContext, records: list[dict[str, Any]], bench: dict[str, Any]
) -> tuple[ProbePlan | None, str | None]:
    """The probe's plan for a drafted series that just ran, or why it gets none."""
    probe = bench.get("verify_probe", {})
    shape, reason = drafted_shape(records, _not_probed_because(ctx, bench, probe))
    if shape is None:
        return None, reason
    cap, depth = shape
    widths = sorted({w for w in probe["widths"] if MIN_WIDTH <= w <= cap} | {cap + 1})
    context = ctx.settings.context_tokens
    repeat = [probe[k] for k in ("repetitions", "steps", "max_repetitions", "max_warm_ups", "settle_factor")]
    plan = ProbePlan(depth, cap, tuple(widths), *repeat, context_tokens=context)
    if min(plan.steps_at(s, w) for s, w in plan.points()) < MIN_POINT_STEPS:
        longest = max(
            prompt_length(depth, w) + plan.output_tokens(s, w, MIN_POINT_STEPS) for s, w in plan.points()
        )
        return None, (f"its longest request ({longest} tokens, {MIN_POINT_STEPS} steps) does not fit the "
                      f"context ({context})")  # fmt: skip
    return plan, None


def _not_probed_because(ctx: JobContext, bench: dict[str, Any], probe: dict[str, Any]) -> str | None:
    if drafts_nothing := not_probed_because(ctx.job):
        return drafts_nothing  # a plan gives such a series no bench settings to read
    if not bench["enabled"]:
        return "bench.enabled is false"
    if not probe.get("enabled", False):
        return "bench.verify_probe.enabled is false"
    if ctx.job.parallel_streams != ONE_STREAM:
        return "the probe times one stream: series of parallel streams are not probed"
    if later := repeat_left_out_because(ctx.job, probe, "bench.verify_probe", "are not probed"):
        return later
    if ctx.engine.forced_acceptance_args(1, True) is None:
        return "the engine kind cannot force its drafts' acceptance"
    return None


def verify_probe_step(
    ctx: JobContext, records: list[dict[str, Any]], bench: dict[str, Any]
) -> dict[str, Any]:
    """Plan and run the probe after this series (bench.verify_probe); its record for bench.json
    either way (`not_run` says why there is none)."""
    plan, reason = probe_plan(ctx, records, bench)
    return {"not_run": reason} if plan is None else time_verify_steps(ctx, plan)


def _server_args(ctx: JobContext, plan: ProbePlan, server_name: str) -> list[str]:
    """A probe server's extra flags: the engine's forced acceptance, or the series' own drafting."""
    if server_name == SERIES_DRAFTER:
        return list(ctx.settings.extra_args)
    return ctx.engine.forced_acceptance_args(plan.draft_cap, server_name == ACCEPT_ALL) or []


def time_verify_steps(ctx: JobContext, plan: ProbePlan) -> dict[str, Any]:
    """The probe's plan and every request's readings; an error ends it where it happened (the
    readings so far are kept)."""
    record: dict[str, Any] = {"not_run": None, "error": None, **dataclasses.asdict(plan), "servers": {},
                              "points": [], "threads": ctx.settings.threads, "cpu_count": os.cpu_count(),
                              "t_start_mono_s": time.monotonic()}  # fmt: skip
    text_ids: list[int] = []
    try:
        for server_name in (ACCEPT_NONE, ACCEPT_ALL, SERIES_DRAFTER):
            args = _server_args(ctx, plan, server_name)
            record["servers"][server_name] = {"args": args}
            settings = dataclasses.replace(ctx.settings, extra_args=tuple(args))
            log_path = ctx.log_dir / f"verify_probe_{server_name}.log"
            server = ctx.engine.start(ctx.build, ctx.model_path, settings, log_path)
            try:
                text_ids = text_ids or _text_ids(server, plan.depth_tokens * (1 + plan.most_requests()))
                for name, width in plan.points():
                    if name == server_name:
                        record["points"].append(_time_point(server, plan, name, width, text_ids, ctx))
            finally:
                server.stop()
    except Exception as exc:  # a probe's failure is told in the report, not raised
        record["error"] = f"{type(exc).__name__}: {exc}"
    record["t_end_mono_s"] = time.monotonic()
    return record


def _text_ids(server: Any, tokens: int) -> list[int]:
    """Token ids of real text, at least this many (the server's own tokenizer)."""
    return server.tokenize(pydoc_topics_text()[: TEXT_CHARS_PER_TOKEN * tokens + 4096])


def drafter_prompt(text_ids: list[int], request: int, depth_tokens: int) -> list[int]:
    """The series' drafter's prompt of a request: a stretch of real text of its own, at the depth.
    An n-gram drafter keeps what it saw across requests; on a prompt it saw, it would draft the
    continuation it saw and no step would be a plain one."""
    start = (request * depth_tokens) % max(1, len(text_ids) - depth_tokens)
    return text_ids[start : start + depth_tokens]


def prompt_length(depth_tokens: int, width: int) -> int:
    """A probe prompt's tokens: the depth, or the repeated block where that is longer."""
    return max(depth_tokens, TAIL_BLOCKS * width)


def probe_prompt(text_ids: list[int], width: int, depth_tokens: int) -> list[int]:
    """Text to the depth, its last TAIL_BLOCKS x width tokens a block of `width` distinct tokens of
    the text repeated (the whole prompt where that is longer than the depth)."""
    tail = list(dict.fromkeys(text_ids))[:width] * TAIL_BLOCKS
    return text_ids[: max(0, depth_tokens - len(tail))] + tail


def _time_point(
    server: Any, plan: ProbePlan, name: str, width: int, text_ids: list[int], ctx: JobContext
) -> dict[str, Any]:
    """Warm-up requests and timed ones on one prompt (the prompt's cache reused after the first),
    repeated as the plan's rule says, each with its median steady step and the other work the host
    did meanwhile (host_foreign_cores, as a shot records it)."""
    prompt = probe_prompt(text_ids, width, plan.depth_tokens)
    steps = plan.steps_at(name, width)
    budget = plan.output_tokens(name, width, steps)
    requests: list[dict[str, Any]] = []

    def take(warm_up: bool) -> float | None:
        own_text = name == SERIES_DRAFTER
        sent = drafter_prompt(text_ids, len(requests), plan.depth_tokens) if own_text else prompt
        load = HostLoad(server.process.pid if server.process is not None else None)
        load.start()
        reading = server.step_readings(sent, budget, steps, ctx.shot_timeout_s, seed=len(requests))
        median = steady_median_ms(reading["readings"], name, width)
        requests.append({"warm_up": warm_up, **reading, **load.stop(), "steady_median_ms": median})
        return median

    repeated = repeat_until_steady(take, plan.rule())
    first_timed = len(repeated.warm_ups)
    return {"server": name, "width": width, "prompt_tokens": len(prompt), "output_tokens": budget,
            "steps": steps, "warm_ups": len(repeated.warm_ups), "warm_up_settled": repeated.settled,
            "repetitions_run": len(repeated.timed), "window": [first_timed + i for i in repeated.window],
            "spread": repeated.spread, "steady": repeated.steady, "requests": requests}  # fmt: skip
