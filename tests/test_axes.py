"""The grid's axes live in one table (whichshot.shots.axes, issue 34): the shots schema, the cell ids
and the plots read it, so an axis added there is known everywhere."""

from importlib import resources
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
import yaml

from whichshot.figures.cells import cell_id, cell_of
from whichshot.report.plots import rest_effect
from whichshot.shots.axes import AXES, AXIS, BASE_WORKLOAD

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference"
SCHEMA_TYPES = {"string": str, "integer": int, "number": float}


def test_the_table_is_the_shots_schemas_axis_columns_with_their_types():
    schema = yaml.safe_load(resources.files("whichshot.schemas").joinpath("shots.schema.yaml").read_text())
    columns = {name: prop for name, prop in schema["properties"].items() if prop.get("x-axis")}
    assert set(columns) == set(AXES)
    for name, prop in columns.items():
        types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        (value_type,) = [SCHEMA_TYPES[t] for t in types if t != "null"]
        assert AXIS[name].type is value_type, name


@pytest.mark.parametrize("run", ["cpu_cost_model", "h200/seed_000", "slurm_local_nodes/compare"])
def test_the_committed_cell_ids_come_back_from_the_table(run):
    """Prefixes, seconds, elided load axes and nodes: every stored cell id of these runs (chunks and
    streams on the H200, nodes on the local cluster) is rebuilt from its row's axes."""
    figures = pd.read_parquet(REFERENCE / run / "figures.parquet")
    rows = figures[figures["cell_id"].fillna("") != ""]
    axes = [a for a in AXES if a in figures]
    rebuilt = [cell_id(cell_of(row, tuple(axes))) for _, row in rows.iterrows()]
    assert rebuilt == list(rows["cell_id"])
    assert any("/ub" in c for c in rebuilt) or any("/on-" in c for c in rebuilt) or run == "cpu_cost_model"


def _warm(rest: float, chunk: int, value: float) -> dict:
    row = {axis: None for axis in AXES}
    row.update(engine="e", model="m", workload=BASE_WORKLOAD, text_kind="real", prompt_tokens_requested=256,
               protocol="warm", rest_s=rest, precondition_s=0.0, context_tokens_requested=2048, order="same",
               spec_mode="none", engine_warmup="engine_default", prefill_chunk_tokens=chunk,
               parallel_streams=1)  # fmt: skip
    return [{**row, "metric": metric, "value": value, "shot_index": None}
            for metric in ("prefill_tok_s", "decode_tok_s")]  # fmt: skip


def test_the_rest_plot_draws_one_line_per_cell_less_its_rest():
    """Two prefill chunks at two rests are two warm lines, each labelled with its chunk (the plot's
    own copy of the axis list once left the chunk out and drew one zig-zag line)."""
    cells = [(rest, chunk, value) for rest in (0.0, 15.0) for chunk, value in ((512, 100.0), (2048, 140.0))]
    rows = [row for rest, chunk, value in cells for row in _warm(rest, chunk, value)]
    fig = rest_effect(pd.DataFrame(rows))
    lines = fig.axes[0].get_lines()
    assert len(lines) == 2
    assert sorted(line.get_label() for line in lines) == ["m p256 ctx2048 ub2048 warm", "m p256 ctx2048 warm"]
    assert sorted(tuple(line.get_ydata()) for line in lines) == [(100.0, 100.0), (140.0, 140.0)]
    plt.close(fig)
