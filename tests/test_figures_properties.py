"""Property tests over generated shot tables (failed shots, engine deaths and resumes, one-shot
series, missing telemetry and host load, other output lengths, two engines, drafting): every figure's
value is recomputed from exactly what it cites, its kind follows the one rule, it names the rule that
selected its shots, and every caveat reaches exactly the figures that cite its shots within its scope."""

import math
import pickle
import random

import pandas as pd
import pytest
from hypothesis import HealthCheck, core, given, seed, settings
from hypothesis import strategies as st

from tests.probe_records import probe_record
from tests.shot_tables import cell, series, table
from whichshot.figures.aggregations import AGGREGATIONS, recompute
from whichshot.figures.energy_figures import BACK_TO_BACK
from whichshot.figures.figure import SOURCE
from whichshot.figures.provenance import KINDS, column_kinds
from whichshot.figures.statistic import (
    ANY_STATUS,
    JOIN,
    ColdRule,
    EveryShotRule,
    ShotIndexRule,
    WarmRule,
    joined,
)
from whichshot.figures.table import compute_figures

ENGINES = ("llama", "hf")
CELLS = [
    cell(
        protocol=p,
        engine=e,
        workload=w,
        prompt_tokens_requested=64 if w == "continue_text" else 384,
        spec_mode=m,
        text_kind=k,
    )
    for e in ENGINES
    for p in ("cold", "warm")
    for w, m, k in (
        ("continue_text", "none", "real"),
        ("verbatim_recall", "none", "real"),
        ("verbatim_recall", "ngram", "real"),
        ("verbatim_recall", "none", "synthetic"),
    )
]


def maybe(values) -> st.SearchStrategy:
    return st.one_of(st.none(), values)


@st.composite
def shot_values(draw, drafted: bool) -> dict | None:
    if draw(st.integers(0, 9)) == 0:
        return None  # the shot failed
    speed = st.floats(1.0, 1000.0, allow_nan=False)
    values = {
        "ttft_s": draw(st.floats(0.01, 2.0)),
        "prefill_tok_s": draw(speed),
        "decode_tok_s": draw(maybe(speed)),
        "engine_prefill_tok_s": draw(speed),
        "engine_decode_tok_s": draw(maybe(speed)),
        "output_tokens": draw(st.sampled_from([16, 16, 16, 9])),
        "output_sha256": draw(st.sampled_from(["x", "x", "y"])),
        "prompt_sha256": "p",
        "host_foreign_cores": draw(maybe(st.floats(0.0, 1.0))),
        "engine_cached_tokens": draw(st.sampled_from([0, 0, 0, 0, 8])),
        "recall_exact": draw(maybe(st.booleans())),
        "copy_fraction": draw(maybe(st.floats(0.0, 1.0))),
    }
    if draw(st.booleans()):
        values.update(
            sm_clock_median_mhz=draw(st.floats(1000, 2000)),
            sm_clock_min_mhz=draw(st.floats(900, 2000)),
            thermal_throttle_seen=draw(maybe(st.booleans())),
            throttle_reasons_seen="sw_power_cap",
            gpu_power_median_w=draw(st.floats(100, 700)),
            gpu_energy_power_w=draw(st.floats(100, 700)),
            gpu_power_reliable=draw(maybe(st.booleans())),
            gpu_energy_j=draw(st.floats(1, 900)),
            energy_j_per_token=draw(st.floats(0.1, 50)),
            telemetry_samples=draw(st.integers(0, 8)),
            telemetry_backends="nvml",
        )
    if drafted:
        drafted_tokens = draw(st.integers(0, 40))
        values.update(
            engine_draft_tokens=drafted_tokens,
            engine_draft_accepted=draw(st.integers(0, drafted_tokens)),
            engine_draft_mean_len=draw(maybe(st.floats(1.0, 8.0))),
            lossless_vs_none=draw(maybe(st.booleans())),
            first_divergence_token=3,
        )
    return values


@st.composite
def shot_tables(draw) -> pd.DataFrame:
    parts = []
    chosen = draw(
        st.lists(st.sampled_from(CELLS), min_size=1, max_size=6, unique_by=lambda c: tuple(c.values()))
    )
    for of in chosen:
        for repeat in range(1, draw(st.integers(1, 2)) + 1):
            n = draw(st.integers(1, 6))
            values = [draw(shot_values(of["spec_mode"] != "none")) for _ in range(n)]
            processes = None
            if of["protocol"] == "warm":  # an engine death or a resume starts a new process
                restarts = sorted(draw(st.sets(st.integers(2, max(2, n)), max_size=2)))
                processes = [1 + sum(position >= r for r in restarts) for position in range(1, n + 1)]
            parts.append(series(of, values, processes, repeat=repeat))
    return table(*parts)


def bench_runs(shots: pd.DataFrame) -> list[dict]:
    """Bracketed llama-bench files for every series (the figures use those of warm cells)."""
    settings = {"n_threads": 2, "n_batch": 2048, "n_ubatch": 512, "n_gpu_layers": 0, "flash_attn": "auto"}
    rows = [
        {"test": "pp", "n_prompt": 64, "n_gen": 0, "n_depth": 0, "samples_tok_s": [590.0, 610.0], **settings},
        {"test": "tg", "n_prompt": 0, "n_gen": 16, "n_depth": 64, "samples_tok_s": [59.0, 61.0], **settings},
    ]
    brackets = [{"bracket": b, "rows": rows, "error": None} for b in ("before", "after")]
    # Every series with the server's verify probe at width 17: a drafted cell gets the cost model.
    probe = probe_record(17, [10.0], [20.0, 22.0], [60.0, 66.0])
    return [
        {"job_id": job, "engine": "eng", "model": "m", "brackets": brackets, "verify_probe": probe}
        for job in shots["job_id"].unique()
    ]


def close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


PROPERTIES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The three properties draw from one seed per session (a fresh one each run, or --hypothesis-seed's),
# so they see the same 40 tables and each table's figures are computed once: compute_figures is the
# whole cost of an example. A property run alone, or first, computes its own; none relies on another.
SHARED_SEED = seed(random.SystemRandom().getrandbits(64)) if core.global_force_seed is None else lambda f: f
_COMPUTED: dict[bytes, tuple] = {}


def figures_of(shots: pd.DataFrame) -> tuple:
    """compute_figures on a generated table and its llama-bench files, once per distinct table."""
    key = pickle.dumps(shots)
    if key not in _COMPUTED:
        if len(_COMPUTED) >= 200:  # shrinking a failure may try many tables
            _COMPUTED.clear()
        _COMPUTED[key] = compute_figures(shots, bench_runs(shots), 0.7)
    return _COMPUTED[key]


@PROPERTIES
@SHARED_SEED
@given(shot_tables())
@pytest.mark.e2e  # tens of seconds: every figure recomputed
def test_every_value_is_recomputed_from_exactly_what_the_figure_cites(shots):
    figures, _caveats = figures_of(shots)
    rows = {f.figure_id: f.as_row() for f in figures}
    assert len(rows) == len(figures), "figure ids are unique"
    by_id = shots.set_index("shot_id", drop=False)
    recomputed: dict[str, float | None] = {}

    def value_of(figure_id: str):
        if figure_id not in recomputed:
            row = rows[figure_id]
            for input_id in row["input_figure_ids"]:
                value_of(input_id)
            recomputed[figure_id] = recompute(row, by_id, recomputed)
        return recomputed[figure_id]

    for figure in figures:
        assert set(figure.shot_ids) <= set(by_id.index)
        if figure.value is not None:
            assert close(value_of(figure.figure_id), figure.value), figure.figure_id
        else:
            assert figure.shot_ids or figure.input_figure_ids, (
                f"{figure.figure_id}: no value and nothing examined"
            )
    cited = {s for f in figures for s in f.shot_ids}
    assert set(shots["shot_id"]) <= cited, "every shot is cited by some figure (its cell's shots_ok at least)"


@PROPERTIES
@SHARED_SEED
@given(shot_tables())
def test_every_kind_follows_the_one_provenance_rule(shots):
    figures, _caveats = figures_of(shots)
    kinds = {f.figure_id: f.kind for f in figures}
    for f in figures:
        how = AGGREGATIONS[f.aggregation]
        inputs = {kinds[i] for i in f.input_figure_ids}
        assert f.kind in KINDS
        if how.inputs == "constant":
            expected = "assumed"
        elif how.rests_on_a_model or inputs & {"inferred", "assumed"}:
            expected = "inferred"
        elif how.inputs == "source":  # one value the tool printed, or arithmetic on its values
            expected = "engine-reported" if how.picks_one_value else "derived"
        elif how.picks_one_value and len(f.shot_ids) == 1 and f.value is not None and len(f.columns) == 1:
            expected = column_kinds()[f.columns[0]]
        else:
            expected = "derived"
        assert f.kind == expected, (f.figure_id, f.kind, expected)


PROTOCOL_RULES = (ColdRule().name, WarmRule().name)
SELECTED_BY = {*PROTOCOL_RULES, ShotIndexRule(1).name, EveryShotRule().name, ANY_STATUS, BACK_TO_BACK}


@PROPERTIES
@SHARED_SEED
@given(shot_tables())
def test_every_figure_names_the_rule_that_selected_its_shots(shots):
    figures, _caveats = figures_of(shots)
    by_id = {f.figure_id: f for f in figures}
    for f in figures:
        if f.columns:  # computed from shots: its selection's rule(s)
            assert f.selected_by and set(f.selected_by.split(JOIN)) <= SELECTED_BY, f.figure_id
        elif f.input_figure_ids:  # arithmetic on figures: their rules, joined
            assert f.selected_by == joined(by_id[i].selected_by for i in f.input_figure_ids), f.figure_id
        else:  # another tool's number or a constant
            assert f.selected_by == SOURCE and not f.shot_ids, f.figure_id


@PROPERTIES
@SHARED_SEED
@given(shot_tables())
def test_caveats_reach_exactly_the_figures_that_cite_their_shots(shots):
    figures, caveats = figures_of(shots)
    axes = shots.set_index("shot_id")
    for caveat in caveats:
        assert caveat["figure_ids"], f"{caveat['caveat_id']} fired but touches no figure"
        expected = []
        for f in figures:
            cites = set(caveat["shot_ids"]) & set(f.shot_ids) or set(caveat["source_ids"]) & set(f.source_ids)
            # a column-scoped caveat reaches figures reading one of its columns, or citing its sources
            reads = not caveat["columns"] or set(caveat["columns"]) & set(f.reads)
            reads = reads or set(caveat["source_ids"]) & set(f.source_ids)
            compares = (
                not caveat["across"] or axes.loc[f.shot_ids, caveat["across"]].nunique(dropna=False) > 1
            )
            if cites and reads and compares:
                expected.append(f.figure_id)
        assert caveat["figure_ids"] == expected, caveat["caveat_id"]
    attached = {(f.figure_id, c) for f in figures for c in f.caveat_ids}
    assert attached == {(i, c["caveat_id"]) for c in caveats for i in c["figure_ids"]}
