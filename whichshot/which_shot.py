"""The "which shot" label of every figure: protocol, shot indices used, rest before the shot, and
whose tool timed it. Fields a figure module left empty are filled from the shots it cites."""

import pandas as pd

from whichshot.figures import Figure

# Cell columns a figure inherits from its shots when all of them agree.
_INHERITED = ("workload", "text_kind", "spec_mode")
_PROTOCOL_WORDS = {
    "cold": "cold (a fresh process per shot, sent once the engine was ready)",
    "warm": "warm (consecutive shots of one process)",
    "cold vs warm": "cold shot 1 against warm shots",
    "all": "every shot, cold and warm",
    "llama-bench": "llama-bench's own protocol (warm-up run, then repetitions)",
}


def label_figures(figures: list[Figure], shots: pd.DataFrame) -> list[Figure]:
    """Fill rest, cell columns, shot indices and source from the cited shots; write which_shot."""
    by_id = shots.set_index("shot_id", drop=False) if "shot_id" in shots else pd.DataFrame()
    for figure in figures:
        cited = by_id.loc[[i for i in figure.shot_ids if i in by_id.index]] if len(by_id) else by_id
        _inherit(figure, cited)
        figure.source = figure.source or _source(figure, len(cited))
        figure.which_shot = which_shot(figure)
    return figures


def which_shot(figure: Figure) -> str:
    """One line a reader can quote next to the number."""
    parts = [_PROTOCOL_WORDS.get(figure.protocol, figure.protocol or "protocol not recorded")]
    if figure.shot_indices:
        parts.append(f"shots used: {figure.shot_indices.removeprefix('shots ')}")
    if figure.protocol in ("warm", "cold vs warm") and figure.rest_s is not None:
        parts.append(f"{figure.rest_s:g} s rest before each warm shot")
    parts.append(f"timed by {figure.timed_by}")
    return "; ".join(parts)


def _inherit(figure: Figure, cited: pd.DataFrame) -> None:
    if cited.empty:
        return
    for column in _INHERITED:
        if not getattr(figure, column) and column in cited:
            setattr(figure, column, _single(cited[column]) or "")
    if figure.rest_s is None and "rest_s" in cited:
        rest = _single(cited["rest_s"])
        figure.rest_s = None if rest is None else float(rest)
    if not figure.shot_indices and "shot_index" in cited:
        figure.shot_indices = index_ranges(cited["shot_index"].dropna().astype(int).tolist())


def _single(values: pd.Series):
    distinct = values.dropna().unique()
    return distinct[0] if len(distinct) == 1 else None


def index_ranges(indices: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'."""
    ranges: list[list[int]] = []
    for index in sorted(set(indices)):
        if ranges and index == ranges[-1][1] + 1:
            ranges[-1][1] = index
        else:
            ranges.append([index, index])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def _source(figure: Figure, n_cited: int) -> str:
    if figure.timed_by == "llama-bench":
        return f"llama-bench JSON: results/bench/{figure.engine}/{figure.model}.json"
    if figure.timed_by.startswith("telemetry"):
        return (
            f"telemetry summary columns of {n_cited} shot(s) in results/shots.parquet; raw samples in "
            "results/telemetry.parquet, tagged with the same shot ids"
        )
    return f"{n_cited} shot(s) in results/shots.parquet"
