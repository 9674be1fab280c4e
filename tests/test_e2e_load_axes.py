"""The seeds' remaining axes end to end on the real engine (issue 19): prefill chunk size and
parallel streams as grid axes of the protocol grid, and speculative modes that differ only by
their draft cap or combine two types, on a workload that copies. The settings must reach the
engine (its own log says so), every row names them, and the figures compare cells that differ by
one axis only."""

import re

import pandas as pd
import pytest

from tests.pipeline import load_config, run_pipeline
from whichshot.figures.cells import cell_id

pytestmark = pytest.mark.e2e
CONTEXT = 1024
CHUNKS = [32, 256]
MODES = {
    "none": {},
    "cap4": {
        "type": "ngram-simple",
        "options": {"spec-ngram-simple-size-n": 4, "spec-ngram-simple-size-m": 4},
    },
    "cap16": {
        "type": "ngram-simple",
        "options": {"spec-ngram-simple-size-n": 4, "spec-ngram-simple-size-m": 16},
    },
    "simple_and_mod": {"type": ["ngram-simple", "ngram-mod"], "options": {"spec-ngram-simple-size-m": 16}},
}


@pytest.fixture(scope="module")
def load_run(tmp_path_factory):
    config = load_config("smoke")
    # The kernel probe times the prefill ceiling's peak, which no test here reads.
    bench = {"enabled": False, "kernel_probe": {"enabled": False}}
    config.update(run_id="load-axes", bench=bench, spec_modes=MODES)
    config["prompts"] = {"lengths": [200]}
    config["protocol"] |= {"output_tokens": 16, "cold_processes": 0, "warm_shots": 3,
                           "context_tokens": [CONTEXT], "prefill_chunk_tokens": CHUNKS,
                           "parallel_streams": [1, 2]}  # fmt: skip
    config["workloads"] = {"names": ["verbatim_recall"], "text_kinds": ["synthetic"], "document_tokens": 144,
                           "max_output_tokens": 180, "context_tokens": CONTEXT, "cold_processes": 0,
                           "warm_shots": 2}  # fmt: skip
    workdir = tmp_path_factory.mktemp("load-axes")
    # Four cores, no profile named: the default workflow profile is found as a user's run finds it,
    # and its measurement slot (with the machine's lock) keeps the measurements apart.
    result = run_pipeline(workdir, config, cores=4)
    assert result.returncode == 0, result.stderr[-4000:]
    results = workdir / "results"
    return {
        "workdir": workdir,
        "shots": pd.read_parquet(results / "shots.parquet"),
        "figures": pd.read_parquet(results / "figures.parquet"),
        "html": (results / "report" / "index.html").read_text(),
        "terminal": result.stderr,
    }


def _grid(shots: pd.DataFrame) -> pd.DataFrame:
    return shots[shots["workload"] == "continue_text"]


def test_every_chunk_and_stream_count_is_a_cell_of_its_own(load_run):
    grid = _grid(load_run["shots"])
    assert (grid["status"] == "ok").all(), grid.loc[grid["status"] != "ok", "error"].tolist()
    cells = grid.groupby(["prefill_chunk_tokens", "parallel_streams", "protocol"]).size()
    assert set(cells.index) == {(c, n, "warm") for c in CHUNKS for n in (1, 2)}
    assert (
        cells
        == grid.groupby(["prefill_chunk_tokens", "parallel_streams", "protocol"])["series_length"].first()
    ).all()


def test_the_engine_ran_with_the_rows_settings(load_run):
    """llama.cpp prints the physical batch and the slots it made: the row's values, not ours."""
    logs = load_run["workdir"] / "logs" / "engines"
    for row in _grid(load_run["shots"]).drop_duplicates("job_id").to_dict("records"):
        log = (logs / row["job_id"] / "process1.log").read_text(errors="replace")
        assert int(re.search(r"n_ubatch\s*=\s*(\d+)", log).group(1)) == row["prefill_chunk_tokens"]
        assert int(re.search(r"n_slots = (\d+)", log).group(1)) == row["parallel_streams"]


def test_streams_share_the_context_window_and_report_together(load_run):
    grid = _grid(load_run["shots"])
    for streams, rows in grid.groupby("parallel_streams"):
        assert set(rows["context_tokens_engine"]) == {CONTEXT // streams}
        assert (rows["streams_in_flight"] == streams).all()
        assert rows["aggregate_decode_tok_s"].notna().all() and rows["stream_ttft_max_s"].notna().all()
        # the slowest stream is no faster than the mean, and the longest TTFT no shorter than stream 1's
        assert (rows["stream_decode_tok_s_min"] <= rows["stream_decode_tok_s_mean"] + 1e-9).all()
        assert (rows["stream_ttft_max_s"] >= rows["ttft_s"] - 1e-9).all()
    one = grid[grid["parallel_streams"] == 1]
    assert (one["aggregate_decode_tok_s"] - one["decode_tok_s"]).abs().max() < 1e-6


def test_load_figures_compare_cells_that_differ_by_one_axis(load_run):
    figures = load_run["figures"].set_index("figure_id")
    chunked = figures[figures["metric"] == "prefill_tok_s_vs_largest_chunk"]
    assert len(chunked) == 2  # the 32-token chunk's cells (1 and 2 streams) against 256's
    for _, fig in chunked.iterrows():
        top, bottom = (figures.loc[i] for i in fig["input_figure_ids"])
        assert top["prefill_chunk_tokens"] == 32 and bottom["prefill_chunk_tokens"] == 256
        assert top["parallel_streams"] == bottom["parallel_streams"] and top["protocol"] == bottom["protocol"]
        assert fig["value"] == pytest.approx(top["value"] / bottom["value"])
        assert fig["kind"] == "derived"
    streams = figures[figures["metric"] == "aggregate_decode_vs_one_stream"]
    assert len(streams) == 2 and set(streams["parallel_streams"]) == {2}
    for _, fig in streams.iterrows():
        top, bottom = (figures.loc[i] for i in fig["input_figure_ids"])
        assert (top["metric"], bottom["metric"], bottom["parallel_streams"]) == (
            "aggregate_decode_tok_s",
            "decode_tok_s",
            1,
        )
    # a CPU has no GPM: no bytes figure is made up
    assert not (figures["metric"] == "prefill_dram_bytes").any()


def test_default_axis_values_keep_their_old_cell_ids(load_run):
    figures = load_run["figures"]
    default = figures[(figures["prefill_chunk_tokens"] == 256) & (figures["parallel_streams"] == 1)]
    assert not default.empty and not default["cell_id"].str.contains("/np1").any()
    assert figures.loc[figures["prefill_chunk_tokens"] == 32, "cell_id"].str.contains("ub32").all()
    assert cell_id({"engine": "e", "prefill_chunk_tokens": 512, "parallel_streams": 1}) == "e"


def test_each_mode_row_names_its_types_draft_cap_and_verify_width(load_run):
    work = load_run["shots"][load_run["shots"]["workload"] == "verbatim_recall"]
    expected = {
        "none": (None, None),
        "cap4": ("ngram-simple", 4),
        "cap16": ("ngram-simple", 16),
        "simple_and_mod": ("ngram-simple,ngram-mod", 64),
    }  # fmt: skip  (ngram-mod's default n_max)
    for mode, (types, cap) in expected.items():
        rows = work[work["spec_mode"] == mode]
        assert len(rows) == 2 and (rows["status"] == "ok").all()
        assert rows["spec_types"].isna().all() if types is None else (rows["spec_types"] == types).all()
        if cap is not None:
            assert (rows["spec_draft_cap_tokens"] == cap).all() and (
                rows["spec_verify_width"] == cap + 1
            ).all()
            # tokens emitted per verification step (accepted drafts + the target's own) never exceed
            # the positions verified per step
            drafted = rows.dropna(subset=["engine_draft_mean_len"])
            assert not drafted.empty and (drafted["engine_draft_mean_len"] <= cap + 1).all()


def test_every_width_and_combination_has_acceptance_figures(load_run):
    """Acceptance, tokens per step and speed-up per draft cap and per combination of types; the
    lossless check is measured, not assumed (batched verification may round differently)."""
    figures = load_run["figures"]
    for mode in ("cap4", "cap16", "simple_and_mod"):
        mine = figures[(figures["spec_mode"] == mode) & (figures["workload"] == "verbatim_recall")]
        wanted = {"engine_draft_mean_len", "acceptance_rate", "speedup_vs_none", "lossless_share"}
        assert wanted <= set(mine["metric"])
        assert mine.loc[mine["metric"] == "lossless_share", "value"].between(0, 1).all()


def test_report_lays_out_the_chunk_and_streams_table(load_run):
    html = load_run["html"]
    assert "Prefill chunk and parallel streams" in html
    table = html.split('id="load"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr><td>llama_cpp</td>") == 4  # one row per grid cell: 2 chunks x 1/2 streams
    assert "prefill_tok_s_vs_largest_chunk" in table and "aggregate_decode_vs_one_stream" in table
    summary = (load_run["workdir"] / "results" / "report" / "summary.md").read_text()
    assert "## Prefill chunk and parallel streams" in summary


def test_measurements_never_overlap_with_several_cores(load_run):
    shots = load_run["shots"].dropna(subset=["t_request_mono_s"])
    spans = shots.groupby("job_id").agg(start=("t_request_mono_s", "min"), end=("t_end_mono_s", "max"))
    spans = spans.sort_values("start")
    assert (spans["start"].iloc[1:].to_numpy() >= spans["end"].cummax().iloc[:-1].to_numpy()).all()
    assert "series_overlapped" not in set(
        pd.read_parquet(load_run["workdir"] / "results" / "caveats.parquet")["caveat_id"]
    )


def test_progress_is_told_in_the_log_and_on_the_terminal(load_run):
    """Each shot is announced with its series and position; after the first series an estimate."""
    job = _grid(load_run["shots"])["job_id"].iloc[0]
    log = (load_run["workdir"] / "logs" / "run_series" / f"{job}.log").read_text()
    assert f"measuring {job}: shot 1 of 3" in log and f"measuring {job}: shot 3 of 3" in log
    told = [line for line in load_run["terminal"].splitlines() if "series done; measuring" in line]
    assert len(told) == len(load_run["shots"])  # one line per shot, every series
    assert any("left, " in line for line in told)  # an estimate once a series has finished
