"""The metrics table: every metric the report lays out by name, with its column header, the unit shown
there and the report table or section that shows it, and the sections' titles and intros.

The report's tables (HTML and Markdown) read their columns from here, and a claim may name any metric
here (named_metrics). A figure whose metric no row names still shows: in "Other figures"; the rows
under "other" name the metrics that go there on purpose.
"""

from dataclasses import dataclass
from functools import cache

from whichshot.figures.answer_figures import ANSWER_METRICS
from whichshot.figures.constants import CONSTANTS
from whichshot.figures.engine_figures import ENGINES
from whichshot.figures.node_figures import NODES
from whichshot.figures.side_figures import SAME_OUTPUT, Side
from whichshot.figures.speedup_model_figures import (
    ACCEPTED_SHARE,
    DRAFTER_SHARE,
    DRAFTER_STEP,
    KERNEL_SHARE,
    PLAIN_STEP_MS,
    PREDICTED_SPEEDUP,
    PREDICTION_RESIDUAL,
    PROBE_REPETITIONS,
    PROBE_SPREAD,
    STEP_RATIO,
    VERIFY_COST,
    VERIFY_COST_SPREAD,
)
from whichshot.figures.verdict import METHOD as VERDICT_METHOD
from whichshot.figures.workload_figures import SPEEDUP_METRIC


@dataclass(frozen=True)
class Metric:
    """A metric as one table or section of the report shows it. A metric shown in several places has a
    row for each: the header can differ, and each table keeps its own column order (the order of its
    rows here)."""

    metric: str
    header: str  # "" in a section: it lists each figure under its own metric and unit
    unit: str  # the unit in the header
    shown_in: str  # the table or section (PLACES)
    meaning: str = ""  # a workload check's: what a hit means


Column = tuple[str, str, str]  # (metric, header, unit)


def _table(shown_in: str, *columns: Column) -> tuple[Metric, ...]:
    return tuple(Metric(metric, header, unit, shown_in) for metric, header, unit in columns)


def _listed(shown_in: str, *metrics: str) -> tuple[Metric, ...]:
    return tuple(Metric(metric, "", "", shown_in) for metric in metrics)


def _against_reference(side: Side, shown_in: str) -> tuple[Metric, ...]:
    """The columns that set a side against the reference side."""
    return _table(
        shown_in,
        (side.metric("decode_ratio"), "decode vs", "×"),
        (side.metric("prefill_ratio"), "prefill vs", "×"),
        (side.metric(SAME_OUTPUT), "same output as", "% of shots"),
    )


# (side, the other side's axis (a first column where rows differ in it), anchor, title, what the
# sides share and what differs)
SIDES = (
    (ENGINES, NODES.axis, "engines", "Engines side by side",
     "The same model file, prompt, workload and protocol on each engine, in one run. A speculative mode "
     "is one engine kind's setting: an engine without it shows —, it never ran as no drafting."),
    (NODES, ENGINES.axis, "nodes", "Nodes side by side",
     "The same engine build, model file, prompt, workload and protocol on each node of the comparison "
     "(placement.compare_nodes), in one run. A ratio is of whole machines: GPU, driver, power limit, "
     "CPU and their load differ with the node (caveat nodes_compared; the machines table under What "
     "ran says what each node recorded)."),
)  # fmt: skip
# The sections that list figures by metric (or by kind), in report order: (key, title, intro).
SECTIONS = (
    ("crosschecks", "Cross-checks: two timers side by side",
     "Our client against the engine's own timings, the engine's warm speed against llama-bench "
     "(another tool with its own protocol), and our warm TTFT and decode against a peer's OpenAI client "
     "(llama-benchy, when bench.peer_client is on)."),
    ("power", "Clock ratio, clock drops and outliers",
     "Is a warm slowdown only the clock? Each prediction assumes a fixed cycle count per token."),
    ("ceilings", "Physical ceilings: how close to the wall?",
     "Decode ceiling = peak bandwidth / bytes read per token (weights plus KV cache); prefill ceiling "
     "= peak compute / FLOPs per prompt token. Inferred: they rest on that model of the machine. A "
     "decode share above 1 needs more than one token per weight read (drafting); any other share "
     "above 1 is a defect of the ceiling (caveat share_above_ceiling). On a CPU the compute peak is "
     "the engine's own kernels at the model's weight types (llama-bench on a synthetic model), else "
     "our float32 GEMM probe."),
    ("verify_width", "What a wider verify block costs here",
     "The server's verify probe, right after each drafted series: a step verifying w positions (w - 1 "
     "drafts, seed 002's verify block) with no draft or every draft accepted, over a step of one token, "
     "by the server's own clock. The gap between the two is what the accepted tokens cost (sampling "
     "each position, emitting it); the first is the forward pass over w positions. llama-bench's spread "
     "of its verify-cost repetitions is beside them."),
    ("noise", "Verdicts: spreads, intervals and comparisons",
     f"The answer block's figures with their provenance. Verdicts: {VERDICT_METHOD}."),
    ("constants", "Constants our judgments rest on",
     "Tolerances and thresholds we chose (assumed); every caveat and plot that uses one reads it "
     "from here."),
    ("other", "Other figures",
     "Figures of this run that no table above lays out (shown with their full provenance)."),
)  # fmt: skip
# The engine's kernels at each of the model's weight types (ceiling_figures): one metric per type,
# {device}_engine_matmul_{type}_flop_s, shown with the ceilings.
ENGINE_MATMUL = "_engine_matmul_"
# The verify probe's step at each width it timed: verify_step_ratio_{none,all}_accepted_w{width}.
PER_NAME = {ENGINE_MATMUL: "ceilings", STEP_RATIO: "verify_width"}

METRICS: tuple[Metric, ...] = (
    *_table(
        "headline",
        ("ttft_s", "TTFT", "s"),
        ("prefill_tok_s", "prefill", "tok/s"),
        ("decode_tok_s", "decode", "tok/s"),
        ("engine_prefill_tok_s", "prefill (engine)", "tok/s"),
        ("engine_decode_tok_s", "decode (engine)", "tok/s"),
        ("energy_j_per_output_token", "J/output token", "J/token, counter"),
        ("energy_j_per_prefill_token", "J/prefill token", "J/token, counter"),
        ("shots_ok", "ok", "shots"),
    ),
    # The workload table also shows the checks, after these.
    *_table(
        "workload",
        ("decode_tok_s", "decode", "tok/s"),
        (SPEEDUP_METRIC, "speed-up over none", "×"),
        ("shared_prefix_speedup_vs_none", "speed-up, shared prefix", "× up to the divergence"),
        ("acceptance_rate", "acceptance", "%"),
        ("engine_draft_mean_len", "mean len", "tokens/step"),
        ("copy_fraction", "copy from input", "%"),
        ("self_repetition", "self-repetition", "%"),
        ("prompt_self_repetition", "input repeats itself", "%"),
        ("lossless_share", "output vs none", "identical / up to near-ties / changed"),
    ),
    # Per-workload checks: the header is the check's short name.
    *(
        Metric(metric, name, "", "checks", meaning)
        for metric, name, meaning in (
            ("task_done_share", "task", "passed its workload's task gate"),
            ("loop_share", "loop", "the output ends in a degenerate loop"),
            ("recall_exact_share", "recall", "the document came back verbatim"),
            ("edit_made_share", "edit", "the returned file has the asked rename"),
            ("edit_intact_share", "rest intact", "nothing but the rename changed"),
            ("needle_found_share", "needle", "the planted passphrase is in the output"),
            ("code_parses_share", "parses", "the code parses as Python 3"),
        )
    ),
    # A trace: the whole mix per mode (and per text kind), then each request.
    *_table(
        "trace_mix",
        ("mix_speedup", "mix speed-up", "×"),
        ("mix_decode_s_saved", "decode time saved", "s per pass"),
        ("mix_copy_fraction", "copy from input", "%"),
        ("requests_measured", "requests run", "requests"),
        ("requests_skipped", "skipped", "requests"),
    ),
    *_table(
        "trace_requests",
        ("output_tokens", "output", "tokens"),
        ("decode_tok_s", "decode", "tok/s"),
        (SPEEDUP_METRIC, "speed-up over none", "×"),
        ("acceptance_rate", "acceptance", "%"),
        ("copy_fraction", "copy from input", "%"),
        ("self_repetition", "self-repetition", "%"),
        ("lossless_share", "lossless vs none", "shots"),
        ("shots_ok", "ok", "shots"),
    ),
    # Per drafted cell: the measured speed-up beside the cost model's (figures.speedup_model_figures).
    *_table(
        "speedup_model",
        (SPEEDUP_METRIC, "measured speed-up", "×"),
        (PREDICTED_SPEEDUP, "predicted", "×"),
        (PREDICTION_RESIDUAL, "unexplained", "measured / predicted - 1"),
        ("engine_draft_mean_len", "mean len", "tokens/step"),
        (PLAIN_STEP_MS, "one-token step", "ms, server"),
        (KERNEL_SHARE, "kernel share", "of a verify step"),
        (ACCEPTED_SHARE, "per-token share", "of a verify step"),
        (DRAFTER_SHARE, "drafter share", "of a verify step"),
        (DRAFTER_STEP, "drafter's plain step", "over one-token step"),
        (PROBE_SPREAD, "probe spread", "slowest / fastest"),
        (PROBE_REPETITIONS, "probe requests", "most timed at a point"),
        (VERIFY_COST, "verify cost, kernel only", "t(k+1) / t(1), llama-bench"),
    ),
    # Per cell: the other timings of workload cells (the headline has the grid's), clocks, power, energy.
    *_table(
        "detail",
        ("shots_ok", "ok", "shots"),
        ("ttft_s", "TTFT", "s"),
        ("prefill_tok_s", "prefill", "tok/s"),
        ("engine_prefill_tok_s", "prefill (engine)", "tok/s"),
        ("engine_decode_tok_s", "decode (engine)", "tok/s"),
        ("sm_clock_median_mhz", "SM clock", "MHz"),
        ("cpu_freq_median_mhz", "CPU clock", "MHz"),
        ("gpu_power_median_w", "power, NVML median", "W"),
        ("gpu_energy_power_w", "power, energy counter", "W"),
        ("energy_j_per_token", "energy", "J/token"),
        ("energy_j_per_output_token", "J/output token", "J/token, counter"),
        ("energy_j_per_prefill_token", "J/prefill token", "J/token, counter"),
    ),
    # The side-by-side tables (engines; nodes of a node comparison): per side (the cells' own figures),
    # then each side against the reference side.
    *_table(
        "per_side",
        ("decode_tok_s", "decode", "tok/s"),
        ("prefill_tok_s", "prefill", "tok/s"),
        ("ttft_s", "TTFT", "s"),
        (SPEEDUP_METRIC, "speed-up over none", "×"),
        ("lossless_share", "lossless vs none", "% of shots"),
    ),
    *(metric for side, _beside, key, *_ in SIDES for metric in _against_reference(side, key)),
    # The load table (seed 000's chunk table, seed 002's streams against capacity): per protocol-grid
    # cell where the run varies the prefill chunk or the parallel streams.
    *_table(
        "load",
        ("prefill_tok_s", "prefill", "tok/s"),
        ("prefill_tok_s_vs_largest_chunk", "vs largest chunk", "×"),
        ("prefill_dram_bytes", "DRAM bytes per prefill", "B"),
        ("energy_j_per_prefill_token", "energy per prefill token", "J/token"),
        ("decode_tok_s", "decode, stream 1", "tok/s"),
        ("stream_decode_tok_s_mean", "decode per stream", "tok/s"),
        ("aggregate_decode_tok_s", "decode, all streams", "tok/s"),
        ("aggregate_decode_vs_one_stream", "all streams vs one", "×"),
        ("stream_decode_vs_one_stream", "per stream vs one", "×"),
        ("stream_ttft_max_s", "longest TTFT", "s"),
        ("context_tokens_engine", "context per slot", "tokens"),
        ("kv_cache_mib", "KV cache", "MiB"),
    ),
    # Warm cells shot by shot: a row per cell and metric.
    *_listed("series", "prefill_tok_s", "decode_tok_s", "sm_clock_median_mhz", "cpu_freq_median_mhz"),
    *_listed(
        "crosschecks",
        "client_vs_engine_decode_ratio",
        "client_vs_engine_prefill_ratio",
        "client_vs_engine_ttft_ratio",
        "engine_ttft_s",
        *(
            f"{test}_vs_llama_bench_ratio{end}"
            for test in ("prefill", "decode")
            for end in ("", "_low", "_high")
        ),
        *(f"bench_{test}_tok_s{end}" for test in ("pp", "tg") for end in ("", "_lowest", "_highest")),
        "ttft_vs_peer_ratio",
        "decode_vs_peer_ratio",
        "peer_ttft_s",
        "peer_decode_tok_s",
    ),
    *_listed(
        "power",
        "prefill_tok_s_clock_predicted",
        "prefill_tok_s_clock_residual",
        "prefill_tok_s_warm_cold_ratio",
        "decode_tok_s_clock_predicted",
        "decode_tok_s_clock_residual",
        "decode_tok_s_warm_cold_ratio",
        "sm_clock_best_median_mhz",
        "clock_drop_thermal_normal_shots",
        "outlier_shots",
    ),
    # Also every {device}_engine_matmul_{type}_flop_s (ENGINE_MATMUL).
    *_listed(
        "ceilings",
        "cpu_copy_bandwidth_bytes_s",
        "cpu_copy_one_thread_bandwidth_bytes_s",
        "cpu_gemm_flop_s",
        "cpu_engine_matmul_flop_s",
        "gpu_engine_matmul_flop_s",
        "gpu_peak_bandwidth_bytes_s",
        "gpu_copy_bandwidth_bytes_s",
        "gpu_gemm_flop_s",
        "gpu_peak_flop_s",
        "weight_bytes_per_token",
        "kv_bytes_per_context_token",
        "active_parameters_per_token",
        "prefill_parameters_per_token",
        "attention_flops_per_context_token",
        "decode_ceiling_tok_s",
        "decode_share_of_ceiling",
        "prefill_ceiling_tok_s",
        "prefill_share_of_ceiling",
    ),
    *_listed("verify_width", VERIFY_COST_SPREAD),
    *_listed("noise", *sorted(ANSWER_METRICS)),
    # The constants section lists the assumed figures, whatever their metric; the warm fraction and the
    # verdict margin are the config's (constants.constant_figures).
    *_listed("constants", *(constant.metric for constant in CONSTANTS), "warm_fraction", "verdict_margin"),
    # Cell statistics and ratios no table lays out: they show with their full provenance.
    *_listed(
        "other",
        "recall_similarity",
        "stream_decode_tok_s_min",
        "server_acceptance_rate",
        "server_accepted_per_step",
        # The start-up phases an engine logs (vLLM), beside its cold shots.
        "engine_load_weights_s",
        "engine_compile_s",
        "engine_warmup_s",
        "engine_init_s",
    ),
)
TABLES = ("headline", "workload", "checks", "trace_mix", "trace_requests", "speedup_model", "detail",
          "per_side", *(key for _side, _beside, key, *_ in SIDES), "load", "series")  # fmt: skip
PLACES = TABLES + tuple(key for key, *_ in SECTIONS)


def columns(shown_in: str) -> tuple[Column, ...]:
    """A table's columns, in order: (metric, header, unit)."""
    return tuple((m.metric, m.header, m.unit) for m in METRICS if m.shown_in == shown_in)


@cache
def places(metric: str) -> tuple[str, ...]:
    """The tables and sections that show a metric by name; () for one that falls to "Other figures"
    unnamed."""
    found = tuple(m.shown_in for m in METRICS if m.metric == metric)
    named = tuple(place for part, place in PER_NAME.items() if part in metric and place not in found)
    return found + named


HEADLINE_COLUMNS = columns("headline")
WORKLOAD_COLUMNS = columns("workload")
TRACE_MIX_COLUMNS = columns("trace_mix")
TRACE_REQUEST_COLUMNS = columns("trace_requests")
SPEEDUP_MODEL_COLUMNS = columns("speedup_model")
DETAIL_COLUMNS = columns("detail")
PER_SIDE = columns("per_side")
LOAD_COLUMNS = columns("load")
# (metric, short name, what a hit means)
CHECKS = tuple((m.metric, m.header, m.meaning) for m in METRICS if m.shown_in == "checks")
SERIES_METRICS = tuple(metric for metric, *_ in columns("series"))


def vs_reference(side: Side) -> tuple[Column, ...]:
    """The columns that set a side against the reference side."""
    return columns(next(key for other, _beside, key, *_ in SIDES if other == side))


def named_metrics() -> frozenset[str]:
    """The metrics a claim can name: every metric of the table (what the report lays out by name,
    the cell statistics, the workload ratios and shares, the constants)."""
    return frozenset(m.metric for m in METRICS)
