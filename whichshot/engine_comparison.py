"""Cross-engine figures: the same model, workload, text and protocol on every engine, side by side.

A comparison group is a series label without its engine (and, for workloads, without its mode):
every (engine, mode) cell of a group that two or more engines ran gets xengine_* figures, so a
report can set e.g. llama.cpp's n-gram mode beside transformers' prompt lookup. Ratios compare
only the same mode on two engines; the reference engine is the group's first (config order).
"""

import pandas as pd

from whichshot.figures import Figure, cell_statistic
from whichshot.lossless import NO_DRAFT
from whichshot.stats import WarmRule

# (shot column, metric, unit, kind of one value)
SPEED = (
    ("decode_tok_s", "xengine_decode_tok_s", "tok/s", "derived"),
    ("prefill_tok_s", "xengine_prefill_tok_s", "tok/s", "derived"),
    ("ttft_s", "xengine_ttft_s", "s", "measured"),
)
RATIOS = (("decode_tok_s", "xengine_decode_ratio"), ("prefill_tok_s", "xengine_prefill_ratio"))


def comparison_group(row: pd.Series) -> str:
    """The series label without its engine, and without its mode for a workload series."""
    parts = row["series_label"].split(".")[1:]
    return ".".join(parts[:-1] if row["workload"] != "continue_text" else parts)


def engine_comparison_figures(shots: pd.DataFrame, rule: WarmRule) -> list[Figure]:
    """xengine_* figures for every cell of a comparison group that more than one engine ran."""
    ok = shots[shots["status"] == "ok"]
    figures = server_counter_figures(ok)
    if ok.empty or ok["engine"].nunique() < 2:
        return figures
    ok = ok.assign(_group=ok.apply(comparison_group, axis=1))
    for _group, group in ok.groupby("_group", sort=False):
        engines = list(dict.fromkeys(group["engine"]))
        if len(engines) < 2:
            continue
        cells = {key: cell for key, cell in group.groupby(["engine", "spec_mode"], sort=False)}
        for (engine, mode), cell in cells.items():
            figures += _speed(cell, rule)
            figures += _ratios(cell, cells.get((engines[0], mode)), engines[0], rule)
            figures += _speedup(cell, cells.get((engine, NO_DRAFT)), rule)
            figures += _lossless(cell)
            figures += _same_output(cell, cells.get((engines[0], mode)), engines[0])
    return figures


def server_counter_figures(ok: pd.DataFrame) -> list[Figure]:
    """Per series cell with /metrics counter deltas (openai engine): acceptance as the server counts it."""
    if "server_spec_draft_tokens_delta" not in ok or ok["server_spec_draft_tokens_delta"].isna().all():
        return []
    figures: list[Figure] = []
    for _label, cell in ok.groupby("series_label", sort=False):
        figures += _server_counters(cell)
    return figures


def _figure(cell: pd.DataFrame, metric: str, value, unit: str, kind: str, formula: str,
            shot_ids: list[str], note: str = "") -> Figure:  # fmt: skip
    first = cell.iloc[0]
    continue_text = first["workload"] == "continue_text"
    return Figure(
        figure_id="/".join([*first["series_label"].split("."), metric]), value=value, unit=unit,
        kind=kind, formula=formula, engine=first["engine"], model=first["model"],
        prompt_tokens=int(first["prompt_tokens"]) if continue_text else None,
        protocol=first["protocol"], metric=metric, shot_ids=shot_ids, rest_s=float(first["rest_s"]),
        series_label=first["series_label"], note=note, workload=first["workload"],
        text_kind=first["text_kind"], spec_mode=first["spec_mode"],
    )  # fmt: skip


def _used_shots(cell: pd.DataFrame, rule: WarmRule) -> tuple[list[str], str]:
    """Shot ids the cell statistic uses, and how it is formed."""
    if cell["protocol"].iloc[0] == "cold":
        first = cell[cell["shot_index"] == 1]
        return first["shot_id"].tolist(), f"median over {len(first)} fresh processes of shot 1"
    ids, described = [], ""
    for _job, series in cell.groupby("job_id"):
        kept = rule.shot_indices(len(series))
        ids += series[series["series_position"].isin(kept)]["shot_id"].tolist()
        described = rule.describe(len(series))
    return ids, f"{described}, median over {cell['job_id'].nunique()} series"


def _speed(cell: pd.DataFrame, rule: WarmRule) -> list[Figure]:
    protocol = cell["protocol"].iloc[0]
    ids, how = _used_shots(cell, rule)
    figures = []
    for column, metric, unit, kind in SPEED:
        value = cell_statistic(cell, column, protocol, rule)
        if value is None:
            continue
        kind = kind if len(ids) == 1 else "derived"
        figures.append(_figure(cell, metric, value, unit, kind, f"{how}: {column} (whichshot client)", ids))
    return figures


def _ratios(cell: pd.DataFrame, reference: pd.DataFrame | None, ref_engine: str, rule: WarmRule) -> list:
    if reference is None or reference is cell:
        return []
    protocol = cell["protocol"].iloc[0]
    figures = []
    for column, metric in RATIOS:
        ours, theirs = (
            cell_statistic(cell, column, protocol, rule),
            cell_statistic(reference, column, protocol, rule),
        )
        if not ours or not theirs:
            continue
        ids = _used_shots(cell, rule)[0] + _used_shots(reference, rule)[0]
        formula = f"{column} of this engine / {column} of {ref_engine}, same model, prompt, mode and protocol"
        figures.append(
            _figure(cell, metric, ours / theirs, "ratio", "derived", formula, ids, f"vs {ref_engine}")
        )
    return figures


def _speedup(cell: pd.DataFrame, none: pd.DataFrame | None, rule: WarmRule) -> list[Figure]:
    mode, protocol = cell["spec_mode"].iloc[0], cell["protocol"].iloc[0]
    if mode == NO_DRAFT or none is None:
        return []
    ours, base = (
        cell_statistic(cell, "decode_tok_s", protocol, rule),
        cell_statistic(none, "decode_tok_s", protocol, rule),
    )
    if not ours or not base:
        return []
    ids = _used_shots(cell, rule)[0] + _used_shots(none, rule)[0]
    formula = f"decode tok/s with {mode} / decode tok/s without drafting on the same engine"
    return [_figure(cell, "xengine_speedup_vs_none", ours / base, "ratio", "derived", formula, ids)]


def _lossless(cell: pd.DataFrame) -> list[Figure]:
    values = cell["lossless_vs_none"].dropna()
    if values.empty:
        return []
    formula = "share of shots whose output tokens equal this engine's no-draft shot at the same position"
    share = float(values.astype(bool).mean())
    ids = cell.loc[values.index, "shot_id"].tolist()
    return [_figure(cell, "xengine_lossless_share", share, "fraction", "measured", formula, ids)]


def _same_output(cell: pd.DataFrame, reference: pd.DataFrame | None, ref_engine: str) -> list[Figure]:
    """Share of positions where both engines got the same prompt ids and gave the same output ids."""
    if reference is None or reference is cell or "prompt_sha256" not in cell:
        return []
    pairs = cell.merge(reference, on="series_position", suffixes=("", "_ref"))
    pairs = pairs[pairs["prompt_sha256"] == pairs["prompt_sha256_ref"]]
    if pairs.empty:
        return []
    share = float((pairs["output_sha256"] == pairs["output_sha256_ref"]).mean())
    formula = f"share of series positions where the output token ids equal {ref_engine}'s (same prompt ids)"
    ids = pairs["shot_id"].tolist() + pairs["shot_id_ref"].tolist()
    return [
        _figure(
            cell, "xengine_same_output_share", share, "fraction", "measured", formula, ids, f"vs {ref_engine}"
        )
    ]


def _server_counters(cell: pd.DataFrame) -> list[Figure]:
    """Acceptance from the server's own /metrics counters (openai engine), where it exports them."""
    drafted = cell["server_spec_draft_tokens_delta"].dropna()
    if drafted.sum() <= 0:
        return []
    ids = cell.loc[drafted.index, "shot_id"].tolist()
    accepted = cell.loc[drafted.index, "server_spec_accepted_tokens_delta"].sum()
    rate = accepted / drafted.sum()
    formula = "sum of /metrics accepted-token deltas / sum of draft-token deltas over the cell's shots"
    figures = [_figure(cell, "server_acceptance_rate", rate, "fraction", "engine-reported", formula, ids)]
    steps = cell.loc[drafted.index, "server_spec_drafts_delta"]
    if steps.notna().all() and steps.sum() > 0:
        per_step = accepted / steps.sum()
        formula = "sum of accepted-token deltas / sum of verification-step (drafts) deltas"
        figures.append(_figure(cell, "server_accepted_per_step", per_step, "tokens", "derived", formula, ids))
    return figures
