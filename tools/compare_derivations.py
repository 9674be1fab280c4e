"""What changed when a run's figures were re-derived: the figures.parquet of an older commit against
the current one, matched by metric and by the cells of the shots each cites (figure ids changed
form, so they cannot be matched by id).

Usage: python tools/compare_derivations.py RUN_DIR OLD_REV [--rows N]
  RUN_DIR: a run directory with shots.parquet and figures.parquet (the new derivation)
  OLD_REV: the git revision whose RUN_DIR/figures.parquet is the old derivation
Prints, per metric: figures matched, values changed, kinds changed, caveat sets changed, figures only
in the old or only in the new table; then the matched figures whose value changed most.
"""

import argparse
import io
import subprocess
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from whichshot.figures.cells import cell_id, cell_of  # noqa: E402
from whichshot.shots.upgrade import read_shots  # noqa: E402

# Old metric names -> the metric the new derivation gives the same number under.
RENAMED = {
    "draft_mean_len": "engine_draft_mean_len",
    "gpu_energy_j_per_token": "energy_j_per_token",
    "clock_cold_mhz": "sm_clock_median_mhz",
    "clock_warm_mhz": "sm_clock_median_mhz",
}
# Old figures that repeated another old figure of the same cell (now one figure): not matched.
REPEATS = {
    "prefill_tok_s_warm_measured",
    "decode_tok_s_warm_measured",
    "xengine_decode_tok_s",
    "xengine_prefill_tok_s",
    "xengine_ttft_s",
    "xengine_speedup_vs_none",
    "xengine_lossless_share",
}


def old_figures(run_dir: Path, rev: str) -> pd.DataFrame:
    path = (run_dir / "figures.parquet").resolve().relative_to(Path.cwd().resolve())
    blob = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, check=True).stdout
    return pd.read_parquet(io.BytesIO(blob))


def keyed(figures: pd.DataFrame, cells_of_shot: dict[str, str], old: bool) -> pd.DataFrame:
    """Each figure with its match key: (metric, the cells of its cited shots), or for a figure citing
    no shot (llama-bench, constants) its metric, engine, model and prompt length."""
    rows = []
    for row in figures.to_dict("records"):
        if not old and row.get("shot_index") is not None and not pd.isna(row.get("shot_index")):
            continue
        if old and row["metric"] in REPEATS:
            continue
        metric = RENAMED.get(row["metric"], row["metric"]) if old else row["metric"]
        cells = sorted({cells_of_shot[s] for s in row["shot_ids"] if s in cells_of_shot})
        length = row.get("prompt_tokens") if old else row.get("prompt_tokens_requested")
        where = cells or [
            str(row.get("engine")),
            str(row.get("model")),
            str(None if pd.isna(length) else int(length)),
        ]
        rows.append({**row, "key": " | ".join([metric, *where]), "caveats": frozenset(row["caveat_ids"])})
    return pd.DataFrame(rows)


def compare(run_dir: Path, rev: str) -> pd.DataFrame:
    shots = read_shots(run_dir / "shots.parquet")
    cells_of_shot = {row["shot_id"]: cell_id(cell_of(row)) for row in shots.to_dict("records")}
    old = keyed(old_figures(run_dir, rev), cells_of_shot, old=True).drop_duplicates("key", keep=False)
    new = keyed(pd.read_parquet(run_dir / "figures.parquet"), cells_of_shot, old=False)
    new = new.drop_duplicates("key", keep=False)
    both = old.merge(new, on="key", how="outer", suffixes=("_old", "_new"), indicator=True)
    both["metric"] = [k.split(" | ")[0] for k in both["key"]]
    return both


def summary(both: pd.DataFrame) -> pd.DataFrame:
    matched = both[both["_merge"] == "both"]
    rel = (matched["value_new"] - matched["value_old"]).abs() / matched["value_old"].abs().clip(lower=1e-12)
    changed_value = (rel > 1e-9) | (matched["value_old"].isna() != matched["value_new"].isna())
    by_metric = matched["metric"]
    table = pd.DataFrame({
        "matched": matched.groupby("metric").size(),
        "value_changed": changed_value.groupby(by_metric).sum(),
        "kind_changed": (matched["kind_old"] != matched["kind_new"]).groupby(by_metric).sum(),
        "caveats_changed": (matched["caveats_old"] != matched["caveats_new"]).groupby(by_metric).sum(),
        "old_only": both[both["_merge"] == "left_only"].groupby("metric").size(),
        "new_only": both[both["_merge"] == "right_only"].groupby("metric").size(),
    })  # fmt: skip
    return table.fillna(0).astype(int)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("old_rev")
    parser.add_argument("--rows", type=int, default=10)
    args = parser.parse_args()
    both = compare(args.run_dir, args.old_rev)
    with pd.option_context("display.width", 200, "display.max_rows", 200, "display.max_colwidth", 90):
        print(summary(both).to_string())
        matched = both[(both["_merge"] == "both") & both["value_old"].notna() & both["value_new"].notna()]
        change = (matched["value_new"] / matched["value_old"] - 1).abs()
        worst = matched.assign(change=change).sort_values("change", ascending=False).head(args.rows)
        print(
            worst[["figure_id_new", "kind_old", "kind_new", "value_old", "value_new"]].to_string(index=False)
        )


if __name__ == "__main__":
    main()
