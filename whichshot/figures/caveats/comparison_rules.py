"""Caveats about figures that set two things side by side: two timers, another tool, real and
synthetic text, drafting against no drafting, and two engines."""

import pandas as pd

from whichshot.figures.catalog import Catalog
from whichshot.figures.caveats.finding import compared_across, whole_cells
from whichshot.figures.cells import group_cells, shots_in
from whichshot.figures.constants import BENCH_TOLERANCE, CLIENT_ENGINE_TOLERANCE
from whichshot.figures.crosscheck_figures import BENCH_TESTS, CLIENT_ENGINE_METRIC
from whichshot.figures.figure import Figure
from whichshot.figures.peer_figures import PEER, PEER_METRICS, peers_missing
from whichshot.shots.axes import AXES, BASE_WORKLOAD, NO_DRAFT
from whichshot.shots.caveat import Finding, flag_false, ids
from whichshot.shots.divergence import NEAR_TIE, outcome_text
from whichshot.shots.lossless import counterpart_key

# What depends on which tokens came out: decode speed, the copy share, the lossless check itself.
OUTPUT_DEPENDENT = frozenset(
    {"decode_tok_s", "engine_decode_tok_s", "copy_fraction", "lossless_vs_none", "output_sha256"}
)
# The columns the engines-side-by-side table compares.
SIDE_BY_SIDE = frozenset({"decode_tok_s", "prefill_tok_s", "ttft_s", "lossless_vs_none"})
LOSSLESS_CHECK_FAILED = "lossless_check_failed"
LOSSLESS_NOT_CHECKED = "lossless_not_checked"


def _cell_figures(catalog: Catalog, metric: str):
    """Figures of this metric about one whole cell (every axis set)."""
    return [f for f in catalog.figures if f.metric == metric and all(a in f.axes for a in AXES)]


def client_engine_disagree(catalog: Catalog) -> Finding | None:
    bad = [
        f
        for f in _cell_figures(catalog, CLIENT_ENGINE_METRIC)
        if f.value is not None and abs(f.value - 1) > CLIENT_ENGINE_TOLERANCE
    ]
    if not bad:
        return None
    worst = max(bad, key=lambda f: abs(f.value - 1))
    affected = frozenset(s for f in bad for s in shots_in(catalog.shots, f.axes)["shot_id"])
    return Finding(
        "client_engine_disagree",
        f"In {len(bad)} cell(s) client-side and engine-reported decode speed differ by more than "
        f"{CLIENT_ENGINE_TOLERANCE:.0%} (client_engine_tolerance; worst {worst.value - 1:+.1%} in "
        f"{worst.cell_id}).",
        affected,
        columns=frozenset({"decode_tok_s", "engine_decode_tok_s"}),
    )


def bench_disagree(catalog: Catalog) -> Finding | None:
    ratios = {metrics[2] for metrics in BENCH_TESTS.values()}
    bad = [
        f
        for f in catalog.figures
        if f.metric in ratios and f.value is not None and abs(f.value - 1) > BENCH_TOLERANCE
    ]
    if not bad:
        return None
    worst = max(bad, key=lambda f: abs(f.value - 1))
    systematic = [f for f in bad if _range_clear_of_one(catalog, f)]
    apart = [f for f in bad if not any("@d" in s for s in f.source_ids)]
    noisy = len(bad) - len(systematic) - len(apart)
    said = [
        f"In {len(bad)} comparison(s) our warm engine-timed speed and llama-bench's differ by more than "
        f"{BENCH_TOLERANCE:.0%} (bench_tolerance; worst {worst.value - 1:+.1%}, {worst.figure_id})."
    ]
    if systematic:
        said.append(
            f"In {len(systematic)} of them every pairing of one of our shots with one llama-bench "
            "repetition differs the same way: a systematic difference, beyond the noise of both."
        )
    if noisy:
        said.append(f"In {noisy} the ranges overlap 1: noise is not ruled out.")
    if apart:
        said.append(
            f"{len(apart)} set us against llama-bench run once, apart from the series, with its decode "
            "from an empty context: not the same work."
        )
    said.append("llama-bench times the engine alone, without HTTP or sampling.")
    return Finding(
        "bench_disagree",
        " ".join(said),
        frozenset(s for f in bad for s in f.shot_ids),
        frozenset(s for f in bad for s in f.source_ids),
        columns=frozenset(c for f in bad for c in f.reads),
    )


def _range_clear_of_one(catalog: Catalog, ratio: Figure) -> bool:
    low = catalog.find(ratio.axes, f"{ratio.metric}_low")
    high = catalog.find(ratio.axes, f"{ratio.metric}_high")
    if low is None or high is None or low.value is None or high.value is None:
        return False
    return low.value > 1 or high.value < 1


def rival_tool_figure(catalog: Catalog) -> Finding | None:
    sources = frozenset(s for f in catalog.figures for s in f.source_ids if s.startswith("llama-bench:"))
    if not sources:
        return None
    return Finding(
        "rival_tool_figure",
        "llama-bench figures come from another tool with its own protocol (warm-up run, mean of "
        "repetitions): compare them with our warm figures, never with a cold shot.",
        source_ids=sources,
    )


def _peer_sources(catalog: Catalog) -> frozenset[str]:
    """The peer runs that a figure with a value rests on."""
    peer_metrics = set(PEER_METRICS)
    return frozenset(
        s for f in catalog.figures if f.metric in peer_metrics and f.value is not None for s in f.source_ids
    )


def peer_client_not_measured(catalog: Catalog) -> Finding | None:
    missing = peers_missing(catalog.bench_runs)
    if not missing:
        return None
    return Finding(
        "peer_client_not_measured",
        f"{PEER} was asked for (bench.peer_client) but gave no numbers for {len(missing)} series "
        f"({'; '.join(sorted(set(missing.values())))}): its figures there are not measured.",
        source_ids=frozenset(missing),
    )


def peer_client_work_differs(catalog: Catalog) -> Finding | None:
    sources = _peer_sources(catalog)
    if not sources:
        return None
    return Finding(
        "peer_client_work_differs",
        f"{PEER} runs its own protocol (a warm-up run, then its runs) against a fresh server started as "
        "the series' was, right after it. Its prompt is cut at random offsets from our prompt text, counted "
        "by the model's tokenizer converted from the GGUF, and sent to /v1/chat/completions as chat "
        "messages (the template's tokens come out of its length); ours are the prompt's token ids, as they "
        "are. Its TTFT is to the first stream chunk with content, timed in its Python client (aiohttp); its "
        "decode speed counts the tokens after the first content chunk over the time to the last one. Both "
        "ignore EOS for the whole output budget. Our host-load check does not cover its runs.",
        source_ids=sources,
    )


def synthetic_text_in_use(catalog: Catalog) -> Finding | None:
    shots = catalog.shots
    synthetic = shots[shots["text_kind"] == "synthetic"]
    if synthetic.empty:
        return None
    return Finding(
        "synthetic_text_in_use",
        "Some figures come from synthetic filler text; each row says which text. How much filler helps "
        "drafting depends on how much it repeats itself: seed 002's filler did (~80 % acceptance vs "
        f"48.8 % on real requests). {_repetition_words(shots)}",
        ids(synthetic),
    )


def _repetition_words(shots: pd.DataFrame) -> str:
    """This run's prompt self-repetition of synthetic against real text, in words."""
    kinds = shots[shots["workload"].isin(set(shots.loc[shots["text_kind"] == "synthetic", "workload"]))]
    medians = kinds.groupby("text_kind")["prompt_self_repetition"].median()
    if not {"real", "synthetic"} <= set(medians.dropna().index):
        return "This run did not measure how much its prompts repeat themselves."
    real, synthetic = float(medians["real"]), float(medians["synthetic"])
    more = "more" if synthetic > real else "less" if synthetic < real else "as much as"
    return (
        f"Here the synthetic prompts repeat their own 8-token spans {more} than the real ones (median "
        f"prompt_self_repetition {synthetic:.1%} vs {real:.1%}): differences between the two in acceptance "
        "and speed-up are measured on this filler, not on seed 002's."
    )


def lossless_check_failed(catalog: Catalog) -> Finding | None:
    """Drafted shots whose output parts from the no-draft one other than at a near-tie of the target
    (shots.divergence: changed by drafting, or no margin measured)."""
    shots = catalog.shots
    near_tie = shots["divergence_outcome"] == NEAR_TIE
    diverged = (shots["status"] == "ok") & flag_false(shots["lossless_vs_none"]) & ~near_tie
    if not diverged.any():
        return None
    examples = shots[diverged].sort_values("first_divergence_token").drop_duplicates("job_id")
    where = "; ".join(f"{r['shot_id']} {outcome_text(r)}" for r in examples.head(4).to_dict("records"))
    return Finding(
        LOSSLESS_CHECK_FAILED,
        f"With drafting on, greedy output differed from the no-draft output in {int(diverged.sum())} shot(s) "
        f"({where}). Drafting is not lossless here: the speed of these cells is the speed of other text, "
        "and their speed-up is not a free lunch." + _unmeasured(shots[diverged]),
        whole_cells(shots, diverged),
        columns=OUTPUT_DEPENDENT,
    )


def _unmeasured(rows: pd.DataFrame) -> str:
    """Why no margin was measured where a divergence has none (shots.divergence), once per reason."""
    reasons = sorted(set(rows["divergence_not_measured_because"].dropna()))
    return f" No margin was measured where they part: {'; '.join(reasons)}." if reasons else ""


def lossless_not_checked(catalog: Catalog) -> Finding | None:
    """Drafted workload cells with an ok shot never compared with the no-draft output (no
    counterpart, or no output to compare): drafting is not known to be lossless there."""
    shots = catalog.shots
    drafted = (shots["spec_mode"] != NO_DRAFT) & (shots["workload"] != BASE_WORKLOAD)
    unchecked = (shots["status"] == "ok") & drafted & shots["lossless_vs_none"].isna()
    if not unchecked.any():
        return None
    return Finding(
        LOSSLESS_NOT_CHECKED,
        f"{int(unchecked.sum())} drafted shot(s) were never compared with the no-draft output (no ok "
        f"no-draft shot at the same position, or no output to compare; e.g. {_first_ids(shots[unchecked])}): "
        "drafting is not known to be lossless there, so their speed-up is set apart like a lossy one.",
        whole_cells(shots, unchecked),
        columns=OUTPUT_DEPENDENT,
    )


def _first_ids(rows: pd.DataFrame) -> str:
    return ", ".join(rows["shot_id"].head(3))


def output_lengths_differ(catalog: Catalog) -> Finding | None:
    """Drafted cells whose shots decoded another number of tokens than their no-draft counterparts."""
    shots = catalog.shots
    ok = shots[(shots["status"] == "ok") & (shots["workload"] != BASE_WORKLOAD)]
    lengths = {
        counterpart_key(r): r["output_tokens"] for r in ok.to_dict("records") if r["spec_mode"] == NO_DRAFT
    }
    differs = pd.Series(
        [
            r["status"] == "ok"  # a failed shot has no length to compare
            and r["spec_mode"] != NO_DRAFT
            and counterpart_key(r) in lengths
            and lengths[counterpart_key(r)] != r["output_tokens"]
            for r in shots.to_dict("records")
        ],
        index=shots.index,
    )
    if not differs.any():
        return None
    affected = set(whole_cells(shots, differs))
    for cell, _rows in group_cells(shots[differs]):
        affected.update(shots_in(shots, {**cell, "spec_mode": NO_DRAFT})["shot_id"])
    affected &= compared_across(catalog.figures, shots, "spec_mode")
    if not affected:
        return None
    return Finding(
        "output_lengths_differ",
        f"In {int(differs.sum())} drafted shot(s) the output stopped at another length than the no-draft "
        "shot at the same position (the model stops at its end-of-sequence token in workloads): a speed-up "
        "between them compares decode speeds over different numbers of tokens.",
        frozenset(affected),
        across="spec_mode",
    )


def acceptance_length_not_derivable(catalog: Catalog) -> Finding | None:
    shots = catalog.shots
    drafted = shots["engine_draft_tokens"].fillna(0) > 0
    missing = drafted & shots["engine_draft_mean_len"].isna()
    if not missing.any():
        return None
    return Finding(
        "acceptance_length_not_derivable",
        "For some drafted shots the engine reported drafted and accepted token counts but not the mean "
        "accepted length per verification step, so it is not shown (never estimated).",
        whole_cells(shots, missing),
        columns=frozenset({"engine_draft_tokens", "engine_draft_mean_len"}),
    )


def cross_engine_kernels(catalog: Catalog) -> Finding | None:
    compared = compared_across(catalog.figures, catalog.shots, "engine")
    if not compared:
        return None
    shots = catalog.shots
    formats = sorted({f"{row['engine']}: {_compute_format(row)}" for row in shots.to_dict("records")})
    return Finding(
        "cross_engine_kernels",
        "Engines side by side read the same GGUF file but compute differently ("
        + "; ".join(formats)
        + "), with their own kernels, threading and sampling code: a speed or output difference belongs "
        "to the whole engine, not to one cause.",
        compared,
        across="engine",
    )


def _compute_format(row: dict) -> str:
    dtype = row.get("engine_dtype")
    if isinstance(dtype, str):
        return f"{dtype} weights dequantised from GGUF {row['model_file_type']}"
    return f"GGUF {row['model_file_type']} tensors as stored"


def spec_mode_engine_specific(catalog: Catalog) -> Finding | None:
    shots = catalog.shots[catalog.shots["workload"] != BASE_WORKLOAD]
    if shots["engine"].nunique() < 2:
        return None
    every = set(shots["engine"])
    partial = {
        mode: sorted(set(rows["engine"]))
        for mode, rows in shots.groupby("spec_mode")
        if set(rows["engine"]) != every
    }
    if not partial:
        return None
    listed = "; ".join(f"{mode} only on {', '.join(engines)}" for mode, engines in partial.items())
    return Finding(
        "spec_mode_engine_specific",
        f"Speculative modes are settings of one engine kind: {listed}. An engine without settings for a "
        "mode skips it (it is never run as no drafting), so those modes have no same-mode ratio across "
        "engines; each is compared with its own engine's no-draft run.",
        ids(shots[shots["spec_mode"].isin(partial)]),
        columns=SIDE_BY_SIDE,
    )


def cross_engine_prompt_differs(catalog: Catalog) -> Finding | None:
    shots = catalog.shots[catalog.shots["status"] == "ok"]
    if shots["engine"].nunique() < 2:
        return None
    differ = [
        rows
        for _cell, rows in group_cells(shots, tuple(a for a in AXES if a != "engine"))
        if rows["engine"].nunique() > 1 and rows["prompt_sha256"].nunique() > 1
    ]
    affected = frozenset(s for rows in differ for s in rows["shot_id"])
    affected &= compared_across(catalog.figures, catalog.shots, "engine")
    if not affected:
        return None
    return Finding(
        "cross_engine_prompt_differs",
        f"In {len(differ)} comparison(s) the engines' own tokenizers and chat templates turned the same text "
        "into different prompt token ids: their inputs, and so their outputs, are not the same sequence.",
        affected,
        across="engine",
    )


def engine_warmup_differs(catalog: Catalog) -> Finding | None:
    """Engines compared whose processes did not warm up alike before their first shot."""
    shots = catalog.shots
    runs = shots["engine_warmup_run"].fillna("not observed")
    differ = [rows for _cell, rows in group_cells(shots.assign(engine_warmup_run=runs),
                                                  tuple(a for a in AXES if a != "engine"))
              if rows["engine"].nunique() > 1 and rows["engine_warmup_run"].nunique() > 1]  # fmt: skip
    affected = frozenset(s for rows in differ for s in rows["shot_id"])
    affected &= compared_across(catalog.figures, shots, "engine")
    if not affected:
        return None
    example = differ[0].drop_duplicates("engine")
    ran = "; ".join(f"{r['engine']}: {r['engine_warmup_run']}" for r in example.to_dict("records"))
    return Finding(
        "engine_warmup_differs",
        f"Engines are compared whose processes warmed up differently before their first shot ({ran}): a "
        "cold shot is not the same first request on both. Run protocol.engine_warmup on or off to compare "
        "first shots.",
        affected,
        across="engine",
    )


COMPARISON_RULES = (
    client_engine_disagree,
    bench_disagree,
    rival_tool_figure,
    peer_client_not_measured,
    peer_client_work_differs,
    synthetic_text_in_use,
    lossless_check_failed,
    lossless_not_checked,
    output_lengths_differ,
    acceptance_length_not_derivable,
    cross_engine_kernels,
    spec_mode_engine_specific,
    cross_engine_prompt_differs,
    engine_warmup_differs,
)
