"""Statistics over shot series: the warm statistic and robust outliers."""

import math
import statistics
from dataclasses import dataclass

ROBUST_Z_THRESHOLD = 3.5
# Below five values the median absolute deviation is too unstable to call anything an outlier.
MIN_VALUES_FOR_OUTLIERS = 5
_MAD_TO_SIGMA = 0.6745


@dataclass(frozen=True)
class WarmRule:
    """Which shots of a series the warm statistic uses: the median of the last `fraction`."""

    fraction: float = 0.7

    def shot_indices(self, n_shots: int) -> list[int]:
        """1-based shot indices the rule keeps (at least one)."""
        keep = max(1, math.floor(self.fraction * n_shots + 0.5))
        return list(range(n_shots - keep + 1, n_shots + 1))

    def describe(self, n_shots: int) -> str:
        kept = self.shot_indices(n_shots)
        return f"median of the last {self.fraction:.0%} of {n_shots} shots (shots {kept[0]}-{kept[-1]})"


def warm_statistic(values_by_shot: list[float], rule: WarmRule) -> float:
    """Median of the values at the rule's shot indices (values ordered by shot index)."""
    kept = rule.shot_indices(len(values_by_shot))
    return statistics.median(values_by_shot[i - 1] for i in kept)


def robust_z_scores(values: list[float]) -> list[float | None]:
    """0.6745 (x - median) / MAD; None for all when MAD is zero or there are too few values."""
    if len(values) < MIN_VALUES_FOR_OUTLIERS:
        return [None] * len(values)
    center = statistics.median(values)
    mad = statistics.median(abs(v - center) for v in values)
    if mad == 0:
        return [None] * len(values)
    return [_MAD_TO_SIGMA * (v - center) / mad for v in values]


def outlier_flags(values: list[float], threshold: float = ROBUST_Z_THRESHOLD) -> list[bool]:
    """True where |robust z| exceeds the threshold."""
    return [z is not None and abs(z) > threshold for z in robust_z_scores(values)]
