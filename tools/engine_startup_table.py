"""Print a run's shots per engine and cell as the vLLM reference's NOTES read them: start-up (spawn to
ready, and the phases the engine logged), the first shot of each process against the later ones, both
clocks' TTFT and decode, tokens per stream event, drafting and losslessness.

Usage: python tools/engine_startup_table.py RUN_DIR   (RUN_DIR holds shots.parquet)
Each value is a median over the cell's ok shots of the kind the column names (first: shot index 1;
later: shot index 2 and on), printed to three significant digits.
"""

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from whichshot.shots.upgrade import read_shots  # noqa: E402

CELL = ["engine", "workload", "spec_mode", "protocol", "compile_cache"]
STARTUP = ["process_ready_s", "engine_load_weights_s", "engine_compile_s", "engine_warmup_s", "engine_init_s"]
FIRST = ["ttft_s", "engine_ttft_s"]
LATER = ["ttft_s", "engine_ttft_s", "decode_tok_s", "engine_decode_tok_s", "tokens_per_event", "mean_len"]


def table(shots: pd.DataFrame) -> pd.DataFrame:
    ok = shots[shots["status"] == "ok"].copy()
    ok["tokens_per_event"] = ok["output_tokens"] / ok["stream_token_events"]
    ok["mean_len"] = ok["engine_draft_mean_len"]
    ok["lossless"] = ok["lossless_vs_none"].map(lambda v: None if v is None or pd.isna(v) else float(bool(v)))
    first = ok[ok["shot_index"] == 1]
    later = ok[ok["shot_index"] > 1]
    rows = []
    for cell, rows_of_cell in ok.groupby(CELL, dropna=False, sort=True):
        key = dict(zip(CELL, cell, strict=True))
        starts = first.merge(pd.DataFrame([key]), on=CELL)
        after = later.merge(pd.DataFrame([key]), on=CELL)
        row = {**key, "shots": len(rows_of_cell), "processes": rows_of_cell["process_id"].nunique()}
        row.update({c: starts[c].median() for c in STARTUP})
        row.update({f"first_{c}": starts[c].median() for c in FIRST})
        row.update({f"later_{c}": after[c].median() for c in LATER})
        row["compile_cache_run"] = ", ".join(sorted(starts["compile_cache_run"].dropna().unique()))
        row["lossless_share"] = rows_of_cell["lossless"].mean()
        rows.append(row)
    return pd.DataFrame(rows)


def main(run_dir: Path) -> None:
    shots = read_shots(run_dir / "shots.parquet")
    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 250):
        print(table(shots).to_string(index=False, float_format=lambda v: f"{v:.3g}"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
