"""Workload x speculative-mode figures (seed 002): speed-up, acceptance, copy, losslessness, needle."""

import pandas as pd

from whichshot.figures import Figure, cell_statistic
from whichshot.lossless import NO_DRAFT
from whichshot.stats import WarmRule

CELL = ["engine", "model", "workload", "text_kind", "spec_mode", "protocol", "series_label"]
# (column, metric, unit, kind, formula) for shares of boolean checks
SHARES = (
    ("lossless_vs_none", "lossless_share", "fraction", "measured",
     "share of shots whose output tokens equal the no-draft shot's at the same position"),
    ("needle_found", "needle_found_share", "fraction", "measured",
     "share of shots whose output holds the passphrase"),
    ("edit_made", "edit_made_share", "fraction", "measured",
     "share of shots that returned the file with the rename"),
    ("recall_exact", "recall_exact_share", "fraction", "measured",
     "share of shots that repeated the marked section verbatim (whitespace-normalised)"),
)  # fmt: skip


def _figure(key: tuple, metric: str, value, unit: str, kind: str, formula: str, shots, note="",
            timed_by: str = "whichshot (checks on the output text and tokens)") -> Figure:  # fmt: skip
    engine, model, workload, text_kind, mode, protocol, label = key
    return Figure(
        figure_id="/".join([*label.split("."), metric]), value=value, unit=unit, kind=kind,
        formula=formula, engine=engine, model=model, prompt_tokens=None, protocol=protocol,
        metric=metric, shot_ids=shots["shot_id"].tolist(), series_label=label, note=note,
        timed_by=timed_by, workload=workload, text_kind=text_kind, spec_mode=mode,
    )  # fmt: skip


def workload_figures(shots: pd.DataFrame, rule: WarmRule) -> list[Figure]:
    """Per workload cell: speed-up over no drafting, acceptance, copy fraction, check shares."""
    ok = shots[(shots["status"] == "ok") & (shots["workload"] != "continue_text")]
    figures: list[Figure] = []
    cells = {key: group for key, group in ok.groupby(CELL, sort=False)}
    for key, group in cells.items():
        figures += _speedup(key, group, cells, rule)
        figures += _acceptance(key, group)
        figures += _copy(key, group)
        figures += _shares(key, group)
    return figures


def _speedup(key, group, cells, rule) -> list[Figure]:
    engine, model, workload, kind, mode, protocol, label = key
    base_label = ".".join([*label.split(".")[:-1], NO_DRAFT])
    base = cells.get((engine, model, workload, kind, NO_DRAFT, protocol, base_label))
    if mode == NO_DRAFT or base is None:
        return []
    ours = cell_statistic(group, "decode_tok_s", protocol, rule)
    theirs = cell_statistic(base, "decode_tok_s", protocol, rule)
    if not ours or not theirs:
        return []
    formula = (f"decode tok/s with {mode} / decode tok/s without drafting, same workload, text and "
               f"protocol; each the cell's {protocol} statistic")  # fmt: skip
    used = pd.concat([_statistic_rows(group, protocol, rule), _statistic_rows(base, protocol, rule)])
    figure = _figure(key, "speedup_vs_none", ours / theirs, "ratio", "derived", formula, used,
                     timed_by="whichshot client")  # fmt: skip
    figure.shot_indices = _statistic_indices(group, protocol, rule)
    return [figure]


def _statistic_rows(group: pd.DataFrame, protocol: str, rule: WarmRule) -> pd.DataFrame:
    """The shots cell_statistic uses: shot 1 of each fresh process, or each series' kept shots."""
    if protocol == "cold":
        return group[group["shot_index"] == 1]
    kept = [series[series["series_position"].isin(rule.shot_indices(len(series)))]
            for _job, series in group.groupby("job_id")]  # fmt: skip
    return pd.concat(kept)


def _statistic_indices(group: pd.DataFrame, protocol: str, rule: WarmRule) -> str:
    if protocol == "cold":
        return "1 (of each fresh process)"
    kept = rule.shot_indices(int(group.groupby("job_id").size().iloc[0]))
    return f"{kept[0]}-{kept[-1]}" if len(kept) > 1 else str(kept[0])


def _acceptance(key, group) -> list[Figure]:
    drafted = group["engine_draft_tokens"].fillna(0).sum()
    if key[4] == NO_DRAFT or drafted == 0:
        return []
    accepted = group["engine_draft_accepted"].fillna(0).sum()
    formula = "sum of engine-reported draft_n_accepted / sum of draft_n over the cell's shots"
    figure = _figure(key, "acceptance_rate", accepted / drafted, "fraction", "engine-reported", formula,
                     group, timed_by="engine (draft_n, draft_n_accepted)")  # fmt: skip
    return [figure, *_draft_length(key, group)]


def _draft_length(key, group) -> list[Figure]:
    lengths = group["engine_draft_mean_len"].dropna() if "engine_draft_mean_len" in group else []
    if len(lengths) == 0:
        return []
    formula = (
        "median over the cell's shots of the engine's per-request 'mean len': tokens emitted "
        "per verification step that had a draft (accepted draft tokens + the target's token)"
    )
    return [_figure(key, "draft_mean_len", float(lengths.median()), "tokens/step", "engine-reported",
                    formula, group, timed_by="engine log")]  # fmt: skip


def _copy(key, group) -> list[Figure]:
    values = group["copy_fraction"].dropna()
    if values.empty:
        return []
    k = int(group["copy_span_tokens"].dropna().iloc[0])
    formula = f"median share of output tokens inside >= {k}-token spans that occur in the prompt"
    return [_figure(key, "copy_fraction", float(values.median()), "fraction", "derived", formula, group)]


def _shares(key, group) -> list[Figure]:
    figures = []
    for column, metric, unit, kind, formula in SHARES:
        values = group[column].dropna()
        if values.empty:
            continue
        note = _divergence_note(group) if column == "lossless_vs_none" else ""
        figures.append(
            _figure(key, metric, float(values.astype(bool).mean()), unit, kind, formula, group, note)
        )
    return figures


def _divergence_note(group: pd.DataFrame) -> str:
    diverged = group[group["lossless_vs_none"] == False]  # noqa: E712 -- None means not compared
    if diverged.empty:
        return "identical to the no-draft output"
    first = diverged.sort_values("first_divergence_token").iloc[0]
    return f"first diverging token {int(first['first_divergence_token'])} in {first['shot_id']}"
