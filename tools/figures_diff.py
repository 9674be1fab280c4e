"""How two figures tables differ: figures added, removed, and those whose value changed.

Usage: python tools/figures_diff.py OLD.parquet NEW.parquet  (e.g. a reference's figures.parquet
from `git show REV:PATH > old.parquet` against the re-derived one)."""

import math
import sys

import pandas as pd


def _differ(old: float | None, new: float | None) -> bool:
    if old is None or new is None or pd.isna(old) or pd.isna(new):
        return not ((old is None or pd.isna(old)) and (new is None or pd.isna(new)))
    return not math.isclose(old, new, rel_tol=1e-9, abs_tol=1e-12)


def main(old_path: str, new_path: str) -> None:
    old = pd.read_parquet(old_path).set_index("figure_id")
    new = pd.read_parquet(new_path).set_index("figure_id")
    both = old.index.intersection(new.index)
    changed = [i for i in both if _differ(old.at[i, "value"], new.at[i, "value"])]
    print(
        f"{len(old)} -> {len(new)} figures: {len(new.index.difference(old.index))} added, "
        f"{len(old.index.difference(new.index))} removed, {len(changed)} of {len(both)} changed value"
    )
    for metric, count in pd.Series([new.at[i, "metric"] for i in changed]).value_counts().items():
        print(f"  changed {metric}: {count}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
