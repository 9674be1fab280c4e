"""Caveats of cross-engine comparisons and of server-side counters (rules for whichshot.caveats)."""

from typing import Any

import pandas as pd

from whichshot.engine_comparison import comparison_group

XENGINE_PREFIX = "xengine_"
_HF_TIMED = "transformers"


def _caveat(caveat_id: str, sentence: str, figure_ids: list[str]) -> Any:
    from whichshot.caveats import Caveat  # here, not at the top: caveats imports this module

    return Caveat(caveat_id, sentence, figure_ids)


def _xengine_ids(ev: Any, test=lambda f: True) -> list[str]:
    return [f.figure_id for f in ev.figures if f.metric.startswith(XENGINE_PREFIX) and test(f)]


def _engines_of_kind(shots: pd.DataFrame, kind: str) -> set[str]:
    return set(shots.loc[shots["engine_kind"] == kind, "engine"]) if "engine_kind" in shots else set()


def cross_engine_kernels(ev: Any) -> Any:
    ids = _xengine_ids(ev)
    if not ids:
        return None
    formats = sorted({f"{row.engine}: {_compute_format(row)}" for row in ev.shots.itertuples()})
    return _caveat(
        "cross_engine_kernels",
        "Engines side by side read the same GGUF file but compute differently ("
        + "; ".join(formats)
        + "), with their own kernels, threading and sampling code: a speed or output difference "
        "belongs to the whole engine, not to one cause.",
        ids,
    )


def _compute_format(row: Any) -> str:
    dtype = getattr(row, "engine_dtype", None)
    if isinstance(dtype, str):
        return f"{dtype} weights dequantised from GGUF {row.model_file_type}"
    return f"GGUF {row.model_file_type} tensors as stored"


def dequantised_weights(ev: Any) -> Any:
    engines = _engines_of_kind(ev.shots, _HF_TIMED)
    if not engines:
        return None
    hf = ev.shots[ev.shots["engine"].isin(engines)]
    dtypes = ", ".join(sorted(hf["engine_dtype"].dropna().unique())) or "its dtype"
    return _caveat(
        "dequantised_weights",
        f"transformers loads the GGUF file dequantised to {dtypes}: the same weights, held and "
        "multiplied in a wider format than the quantised file (more bytes read per token); its "
        "process start (load and dequantisation) is in process_ready_s, never in a shot. Its "
        "engine-reported timings are hf_server's own: generate() call to first token, first to "
        "last token, measured inside its process.",
        [f.figure_id for f in ev.figures if f.engine in engines],
    )


def spec_mode_engine_specific(ev: Any) -> Any:
    shots = ev.shots[ev.shots["workload"] != "continue_text"]
    if shots["engine"].nunique() < 2:
        return None
    by_mode = shots.groupby("spec_mode")["engine"].unique()
    every = set(shots["engine"])
    partial = {mode: sorted(engines) for mode, engines in by_mode.items() if set(engines) != every}
    if not partial:
        return None
    listed = "; ".join(f"{mode} only on {', '.join(engines)}" for mode, engines in partial.items())
    return _caveat(
        "spec_mode_engine_specific",
        f"Speculative modes are settings of one engine kind: {listed}. An engine without settings "
        "for a mode skips it (it is never run as no drafting), so those modes have no same-mode "
        "ratio across engines; each is compared with its own engine's no-draft run.",
        _xengine_ids(ev, lambda f: f.spec_mode in partial),
    )


def cross_engine_prompt_differs(ev: Any) -> Any:
    if "prompt_sha256" not in ev.shots or ev.shots["engine"].nunique() < 2:
        return None
    ok = ev.shots[ev.shots["status"] == "ok"]
    groups = ok.assign(_group=ok.apply(comparison_group, axis=1)).groupby("_group")
    differ = sorted(
        g for g, rows in groups if rows["engine"].nunique() > 1 and rows["prompt_sha256"].nunique() > 1
    )
    if not differ:
        return None
    return _caveat(
        "cross_engine_prompt_differs",
        f"In {len(differ)} comparison(s) (e.g. {differ[0]}) the engines' own tokenizers and chat "
        "templates turned the same text into different prompt token ids: their inputs, and so their "
        "outputs, are not the same sequence.",
        _xengine_ids(ev),
    )


def server_counters_process_wide(ev: Any) -> Any:
    if "server_metrics_source" not in ev.shots or ev.shots["server_metrics_source"].isna().all():
        return None
    return _caveat(
        "server_counters_process_wide",
        "Server-side speculative counts come from the server's Prometheus /metrics, read before and "
        "after each shot: the counters are process-wide, so anything else the server did between "
        "the two reads is counted in (no other client is sent to it here).",
        [f.figure_id for f in ev.figures if f.metric.startswith("server_")],
    )


ENGINE_RULES = (
    cross_engine_kernels,
    dequantised_weights,
    spec_mode_engine_specific,
    cross_engine_prompt_differs,
    server_counters_process_wide,
)
