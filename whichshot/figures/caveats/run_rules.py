"""Caveats about where and how the shots ran: machine, repeats, failures, broken warm series,
outliers, prompt cache, context, other work on the host, and cold set against warm."""

import pandas as pd

from whichshot.engine.base import NOT_KNOWN_CACHE
from whichshot.figures.catalog import Catalog
from whichshot.figures.caveats.finding import compared_across, whole_cells
from whichshot.figures.cells import series_of
from whichshot.figures.constants import BUSY_CORES, busy_threshold_cores
from whichshot.figures.outlier_figures import outlier_rows
from whichshot.figures.statistic import longest_run, ok_rows
from whichshot.shots.caveat import Finding, ids


def single_machine(catalog: Catalog) -> Finding | None:
    shots = catalog.shots
    if shots["hostname"].nunique() > 1:
        return None
    bench = frozenset(s for f in catalog.figures for s in f.source_ids if s.startswith("llama-bench:"))
    return Finding(
        "single_machine",
        f"All figures come from one machine ({shots['hostname'].iloc[0]}) and {shots['model'].nunique()} "
        "model(s); they say nothing about other hardware.",
        ids(shots),
        bench,
    )


# What makes two machines' numbers comparable, as each shot records it (whichshot.host, NVML).
MACHINE_IDENTITY = (
    "cpu_model",
    "cpu_count",
    "gpu_name",
    "gpu_driver",
    "gpu_power_limit_w",
    "gpu_max_sm_clock_mhz",
)


def several_machines(catalog: Catalog) -> Finding | None:
    shots = catalog.shots
    hosts = sorted(shots["hostname"].unique())
    if len(hosts) < 2:
        return None
    return Finding(
        "several_machines",
        f"The shots come from {len(hosts)} machines ({', '.join(hosts)}); each figure's shots come from one "
        "of them unless the figure carries spans_machines. Machines that share one host's cores (simulated "
        "nodes) measure each other's load: see host_busy.",
        ids(shots),
    )


def spans_machines(catalog: Catalog) -> Finding | None:
    """Figures whose shots ran on more than one machine: a difference between the machines is in
    the number (placement.nodes pins a placement group to one node; see docs/slurm.md)."""
    return _compared(
        catalog,
        "hostname",
        "spans_machines",
        "Some figures rest on shots of more than one machine: whatever differs between the machines "
        "(clocks, power limit, other load) is part of their value, not only the axis they compare.",
    )


def _compared(catalog: Catalog, column: str, caveat_id: str, sentence: str) -> Finding | None:
    """A caveat on the figures whose shots differ in `column` (fires only where some figure does)."""
    compared = compared_across(catalog.figures, catalog.shots, column)
    return Finding(caveat_id, sentence, compared, across=column) if compared else None


def machines_differ(catalog: Catalog) -> Finding | None:
    """Machines whose recorded identity differs: a different GPU, driver, power limit or clock."""
    shots = catalog.shots
    if shots["hostname"].nunique() < 2:
        return None
    differ = []
    for column in MACHINE_IDENTITY:
        per_host = shots.groupby("hostname")[column].agg(lambda v: v.dropna().unique().tolist())
        if len({tuple(map(str, values)) for values in per_host}) > 1:
            words = "; ".join(
                f"{host} {'/'.join(map(str, v)) or 'not recorded'}" for host, v in per_host.items()
            )
            differ.append(f"{column}: {words}")
    if not differ:
        return None
    return Finding(
        "machines_differ",
        f"The machines are not alike: {' | '.join(differ)}. Set figures of one machine beside another's "
        "only with that in mind.",
        ids(shots),
    )


def nodes_compared(catalog: Catalog) -> Finding | None:
    """Figures that set one node's cells against another's, in a run that compares nodes."""
    return _compared(
        catalog,
        "node_requested",
        "nodes_compared",
        "Some figures set one node's shots against another's (placement.compare_nodes): their "
        "difference is the whole machine's (GPU, driver, power limit, clocks, CPU and any other load "
        "on it), not the GPU's alone; machines_differ names what the nodes recorded differently. "
        "Never quote one node's number as the other's.",
    )


def one_repeat(catalog: Catalog) -> Finding | None:
    if catalog.shots["repeat"].max() > 1:
        return None
    return Finding(
        "one_repeat",
        "Each series ran once (repeats = 1): run-to-run variation is not measured.",
        ids(catalog.shots),
    )


def failed_shots(catalog: Catalog) -> Finding | None:
    shots = catalog.shots
    failed = shots[shots["status"] == "failed"]  # a skipped request is its own caveat
    if failed.empty:
        return None
    errors = "; ".join(sorted(set(failed["error"].astype(str)))[:3])
    return Finding(
        "failed_shots",
        f"{len(failed)} shot(s) failed and are in no value; the figures of their cells rest on fewer shots "
        f"than planned (each cell's shots_ok says how many): {errors}",
        whole_cells(shots, shots["status"] == "failed"),
    )


def warm_series_broken(catalog: Catalog) -> Finding | None:
    """Warm series whose shots are not all consecutive ok shots of one process."""
    cut, empty, affected = [], [], set()
    shots = catalog.shots
    warm = shots[(shots["protocol"] == "warm") & (shots["status"] != "skipped")]
    for job_id, series in series_of(warm):
        run = longest_run(series)
        if len(run) == len(series) and len(run) >= 2:
            continue
        (empty if len(run) < 2 else cut).append(f"{job_id} ({len(run)} of {len(series)})")
        affected.update(series["shot_id"])
    if not affected:
        return None
    parts = []
    if cut:
        parts.append(
            f"{len(cut)} warm series used only their longest run of consecutive ok shots of one "
            f"process: {', '.join(cut[:3])}"
        )
    if empty:
        parts.append(
            f"{len(empty)} warm series gave no warm value (no two consecutive ok shots of one "
            f"process): {', '.join(empty[:3])}"
        )
    return Finding(
        "warm_series_broken",
        "; ".join(parts) + ". A shot after a failure, an engine death or a resume is not a warm shot of "
        "the same process, so it is left out of the warm statistic.",
        frozenset(affected),
    )


def outliers_present(catalog: Catalog) -> Finding | None:
    flagged = outlier_rows(catalog.shots)
    if flagged.empty:
        return None
    return Finding(
        "outliers_present",
        f"{len(flagged)} shot(s) in {flagged['job_id'].nunique()} series are speed outliers of their series "
        f"(|robust z| above outlier_robust_z; e.g. {flagged['shot_id'].iloc[0]}); figures use medians, "
        "but look at the per-shot plot.",
        ids(flagged),
    )


PROMPT_CACHE_HIT = "prompt_cache_hit"


def prompt_cache_hit(catalog: Catalog) -> Finding | None:
    """Shots whose engine reused cached prompt tokens (its own count: llama-server's cache_n, an
    OpenAI server's usage.prompt_tokens_details.cached_tokens): their prefill figures are gated out
    (caveats.gates), a cache read is not a prefill."""
    cached = catalog.shots[catalog.shots["engine_cached_tokens"].fillna(0) > 0]
    if cached.empty:
        return None
    return Finding(
        PROMPT_CACHE_HIT,
        f"{len(cached)} shot(s) reused cached prompt tokens (the engine's own count): their prefill is "
        "not a full prefill, and the prefill figures from them are struck.",
        ids(cached),
        columns=PREFILL_COLUMNS,
    )


def prompt_cache_state_unknown(catalog: Catalog) -> Finding | None:
    """Shots whose prefill may have reused a cached prefix without anything saying so."""
    shots = ok_rows(catalog.shots)
    unknown = shots[(shots["prompt_cache_state"] == NOT_KNOWN_CACHE) & shots["engine_cached_tokens"].isna()]
    if unknown.empty:
        return None
    return Finding(
        "prompt_cache_state_unknown",
        f"For {len(unknown)} shot(s) neither the server's arguments nor its answers say whether a cached "
        "prompt prefix was reused (no prefix-caching flag in argv, no cached-token count in usage): their "
        "prefill may not be a full prefill.",
        ids(unknown),
        columns=PREFILL_COLUMNS,
    )


def context_reduced(catalog: Catalog) -> Finding | None:
    shots = catalog.shots.dropna(subset=["context_tokens_engine"])
    reduced = shots[shots["context_tokens_engine"] < shots["context_tokens_requested"]]
    if reduced.empty:
        return None
    row = reduced.iloc[0]
    return Finding(
        "context_reduced",
        f"The engine chose a smaller context window than asked in {len(reduced)} shot(s) (e.g. "
        f"{int(row['context_tokens_engine'])} < {int(row['context_tokens_requested'])}).",
        ids(reduced),
    )


def host_busy(catalog: Catalog) -> Finding | None:
    """Shots during which other work exceeded the cores the engine left idle (busy_threshold_cores):
    the one list of busy shots (its shot ids), for every rule and figure that leaves them out."""
    shots = ok_rows(catalog.shots, "host_foreign_cores")
    limits = busy_limits(shots)
    busy = shots[shots["host_foreign_cores"] > limits]
    if busy.empty:
        return None
    worst = busy.loc[(busy["host_foreign_cores"] - limits[busy.index]).idxmax()]
    return Finding(
        "host_busy",
        f"Other work ran on the machine during {len(busy)} shot(s) beyond the cores the engine left idle: "
        "on average more than (logical cores - engine threads - host_busy_harness_cores) + "
        f"host_busy_margin_cores cores beyond the engine and the measuring process ({_limits_words(busy)}; "
        f"worst {worst['host_foreign_cores']:.2f} cores in {worst['shot_id']}); their speeds may be low "
        f"for reasons outside the engine (column host_foreign_cores).{_fallback_words(busy)}",
        ids(busy),
    )


def busy_limits(shots: pd.DataFrame) -> pd.Series:
    """Each shot's host_busy threshold, in cores (constants.busy_threshold_cores)."""
    pairs = zip(shots["cpu_count"], shots["threads"], strict=True)
    return pd.Series([busy_threshold_cores(c, t) for c, t in pairs], index=shots.index, dtype=float)


def _recorded(shots: pd.DataFrame) -> pd.Series:
    return shots["cpu_count"].notna() & shots["threads"].notna()


def _limits_words(busy: pd.DataFrame) -> str:
    known = busy[_recorded(busy)]
    pairs = sorted({(int(c), int(t)) for c, t in zip(known["cpu_count"], known["threads"], strict=True)})
    words = [f"{busy_threshold_cores(c, t):.2f} cores on {c} cores with {t} engine threads" for c, t in pairs]
    return "; ".join(words) or f"the fixed {BUSY_CORES:g} cores"


def _fallback_words(busy: pd.DataFrame) -> str:
    older = int((~_recorded(busy)).sum())
    if not older:
        return ""
    return (
        f" {older} of them record no core count or engine threads (older rows): for those the fixed "
        f"host_busy_cores ({BUSY_CORES:g}) applies."
    )


def busy_shot_ids(catalog: Catalog) -> frozenset[str]:
    """The shots host_busy names."""
    finding = host_busy(catalog)
    return finding.shot_ids if finding is not None else frozenset()


def series_overlapped(catalog: Catalog) -> Finding | None:
    """Engine processes of one host whose shot windows overlap in time: they competed for the
    machine (a run started without the measurement slot, or by hand beside another). Spans are per
    process, not per series: a series resumed hours later spans the series run in between, though
    none of its processes ran beside them."""
    timed = catalog.shots.dropna(subset=["t_request_mono_s", "t_end_mono_s"])
    timed = timed[timed["process_id"].fillna("") != ""]
    overlapping: set[str] = set()
    for _host, rows in timed.groupby("hostname", dropna=False):
        spans = rows.groupby("process_id").agg(start=("t_request_mono_s", "min"), end=("t_end_mono_s", "max"))
        overlapping |= _overlapping_spans(spans)
    if not overlapping:
        return None
    shots = timed[timed["process_id"].isin(overlapping)]
    series = shots["job_id"].nunique()
    return Finding(
        "series_overlapped",
        f"{series} series ran at the same time as another series on the same host (their "
        "shot windows overlap): their processes shared the machine and its GPU, so their speeds, clocks, "
        "power and energy describe contention, not the engine alone. Measurement jobs must hold the "
        "measurement slot (the workflow profile) and the machine's measurement lock.",
        ids(shots),
    )


def _overlapping_spans(spans) -> set[str]:
    """Ids of the spans (start, end per process) that overlap another span."""
    items = list(spans.itertuples())
    found = set()
    for i, a in enumerate(items):
        for b in items[i + 1 :]:
            if a.start < b.end and b.start < a.end:
                found |= {a.Index, b.Index}
    return found


def host_load_not_measured(catalog: Catalog) -> Finding | None:
    ok = ok_rows(catalog.shots)
    unknown = ok[ok["host_foreign_cores"].isna()]
    if unknown.empty:
        return None
    return Finding(
        "host_load_not_measured",
        f"For {len(unknown)} shot(s) other work on the host was not measured (host_foreign_cores is "
        "empty: a run from before it was recorded, a process psutil could not read, or a server whichshot "
        "attached to, whose work it cannot tell from other work): nothing shows whether the machine was "
        "busy during them.",
        ids(unknown),
    )


def cold_vs_warm_compared(catalog: Catalog) -> Finding | None:
    return _compared(
        catalog,
        "protocol",
        "cold_vs_warm_compared",
        "Some figures set cold shots (shot 1 of fresh processes) against warm ones (the warm rule's shots "
        "of a running process): two protocols, compared on purpose; never quote a number of one as the "
        "other.",
    )


PREFILL_COLUMNS = frozenset({"ttft_s", "prefill_tok_s", "engine_prefill_tok_s", "engine_prompt_ms"})
RUN_RULES = (
    single_machine,
    several_machines,
    spans_machines,
    machines_differ,
    nodes_compared,
    one_repeat,
    failed_shots,
    warm_series_broken,
    outliers_present,
    prompt_cache_hit,
    prompt_cache_state_unknown,
    context_reduced,
    host_busy,
    series_overlapped,
    host_load_not_measured,
    cold_vs_warm_compared,
)
