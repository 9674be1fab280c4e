"""What every figure family works from: the shots, the warm fraction, the llama-bench runs and the
figures made so far (a later family builds on earlier figures by cell and metric, never by id text)."""

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from whichshot.figures.cells import Cell, cell_id
from whichshot.figures.figure import Figure
from whichshot.figures.statistic import ColdRule, WarmRule, protocol_rule
from whichshot.figures.verdict import LEVEL


@dataclass
class Catalog:
    shots: pd.DataFrame
    warm_fraction: float
    verdict_margin: float  # comparisons within ±this are "the same" (protocol.verdict_margin)
    bench_runs: list[dict[str, Any]] = field(default_factory=list)
    probes: list[dict[str, Any]] = field(default_factory=list)  # results/hardware/probe*.json: peaks
    traffic: dict[str, dict[str, Any]] = field(default_factory=dict)  # model -> its per-token costs
    figures: list[Figure] = field(default_factory=list)
    verdict_level: float = LEVEL  # the grid's paired intervals' level (lower per look: run until decided)
    _by_key: dict[tuple, Figure] = field(default_factory=dict)

    def add(self, figures: list[Figure]) -> None:
        for figure in figures:
            self.figures.append(figure)
            self._by_key[(figure.cell_id, figure.metric, figure.shot_index)] = figure

    def find(self, cell: Cell, metric: str, shot_index: int | None = None) -> Figure | None:
        """The figure of this metric about exactly this cell, if one was made."""
        return self._by_key.get((cell_id(cell), metric, shot_index))

    def rule(self, protocol: str) -> ColdRule | WarmRule:
        return protocol_rule(protocol, self.warm_fraction)
