"""Many nodes (issue 21): which node each series is pinned to, what Slurm is asked for, the caveats
a figure gets when its shots come from more than one machine or the machines differ, and a run that
compares nodes (the node an axis: one cell per node, ratios between nodes that say so)."""

import pandas as pd
import pytest

from tests.pipeline import load_config
from tests.shot_tables import cell, series, table
from whichshot.config import check_config
from whichshot.errors import WhichshotError
from whichshot.figures.table import compute_figures
from whichshot.measure.grid import all_jobs
from whichshot.measure.placement import check_on_its_node, nodes_of, slurm_extra
from whichshot.report.tables import build_tables

WARM, COLD = cell(), cell(protocol="cold")


def smoke(**placement) -> dict:
    config = load_config("smoke")
    config["prompts"]["lengths"] = [64, 128, 200]
    config["placement"] = placement
    return check_config(config)


def test_each_placement_group_is_pinned_to_one_node_round_robin_in_grid_order():
    config = smoke(nodes=["n1", "n2"], by=["prompt_tokens_requested"])
    jobs = all_jobs(config)
    nodes = nodes_of(jobs, config["placement"])
    by_length = {}
    for job in jobs:
        by_length.setdefault(job.prompt_tokens_requested, set()).add(nodes[job.job_id])
    assert by_length == {64: {"n1"}, 128: {"n2"}, 200: {"n1"}}  # cold and warm of a length together


def test_by_model_keeps_the_whole_grid_of_one_model_on_one_node():
    config = smoke(nodes=["n1", "n2", "n3"])
    assert set(nodes_of(all_jobs(config), config["placement"]).values()) == {"n1"}


def test_without_nodes_nothing_is_pinned_and_every_measurement_still_has_its_node_alone():
    config = smoke()
    assert set(nodes_of(all_jobs(config), config["placement"]).values()) == {None}
    assert slurm_extra(None) == "--exclusive"
    assert slurm_extra("gpu07") == "--exclusive --nodelist=gpu07"


@pytest.mark.parametrize(
    "placement, said",
    [
        ({"nodes": ["n1"], "by": ["modle"]}, "placement.by: 'modle' is not a grid axis"),
        ({"nodes": ["n1; rm -rf /"]}, "placement.nodes.0"),
        ({"nodes": ["n1", "n1"]}, "placement.nodes"),
        ({"nodes": ["n1"], "compare_nodes": True}, "compare_nodes needs at least two nodes"),
    ],
)
def test_a_bad_placement_is_refused_before_anything_runs(placement, said):
    with pytest.raises(WhichshotError, match="invalid config") as refused:
        smoke(**placement)
    assert said in str(refused.value)


def caveats_of(*parts):
    figures, caveats = compute_figures(table(*parts), [], 0.7)
    fired = {c["caveat_id"]: c for c in caveats}
    return {f.figure_id: f for f in figures}, fired


def hosts_of(figure, shots) -> set[str]:
    return set(shots.set_index("shot_id").loc[figure.shot_ids, "hostname"])


def test_a_figure_whose_shots_ran_on_two_machines_says_so_and_no_other_figure_does():
    together = [*series(WARM, [{}] * 3, hostname="n1"), *series(COLD, [{}] * 2, hostname="n1")]
    figures, fired = caveats_of(together)
    assert "spans_machines" not in fired and "several_machines" not in fired

    apart = [*series(WARM, [{}] * 3, hostname="n1"), *series(COLD, [{}] * 2, hostname="n2")]
    figures, fired = caveats_of(apart)
    shots = table(apart)
    spanning = {f.figure_id for f in figures.values() if f.shot_ids and len(hosts_of(f, shots)) > 1}
    flagged = {f.figure_id for f in figures.values() if "spans_machines" in f.caveat_ids}
    assert spanning and flagged == spanning
    assert "several_machines" in fired and "n1, n2" in fired["several_machines"]["sentence"]


def test_nominally_identical_machines_with_another_power_limit_are_named():
    h200 = {"gpu_name": "NVIDIA H200", "gpu_driver": "580.95.05", "gpu_max_sm_clock_mhz": 1980.0}
    alike = [
        *series(WARM, [{}] * 3, hostname="n1", gpu_power_limit_w=700.0, **h200),
        *series(cell(model="m2"), [{}] * 3, hostname="n2", gpu_power_limit_w=700.0, **h200),
    ]
    assert "machines_differ" not in caveats_of(alike)[1]
    capped = [
        *series(WARM, [{}] * 3, hostname="n1", gpu_power_limit_w=700.0, **h200),
        *series(cell(model="m2"), [{}] * 3, hostname="n2", gpu_power_limit_w=500.0, **h200),
    ]
    sentence = caveats_of(capped)[1]["machines_differ"]["sentence"]
    assert "gpu_power_limit_w: n1 700.0; n2 500.0" in sentence and "gpu_name" not in sentence


def test_the_report_lists_each_machine_as_its_shots_recorded_it():
    from whichshot.report.render import machine_rows

    h200 = {"gpu_name": "NVIDIA H200", "gpu_power_limit_w": 700.0}
    shots = table(
        [*series(WARM, [{}] * 3, hostname="n1", slurm_node="n1", **h200),
         *series(COLD, [{}] * 2, hostname="n2", slurm_node="n2")]
    )  # fmt: skip
    rows = {r["hostname"]: r for r in machine_rows(shots)}
    n1, n2 = rows["n1"], rows["n2"]
    assert (n1["gpu_name"], n1["gpu_power_limit_w"], n1["shots"]) == ("NVIDIA H200", "700", 3)
    assert (n2["gpu_name"], n2["series"], n2["shots"]) == ("", 1, 2)


def test_a_node_comparison_runs_every_series_on_each_node_the_node_an_axis():
    plain = all_jobs(smoke())
    config = smoke(nodes=["a100", "h100"], compare_nodes=True)
    jobs = all_jobs(config)
    assert len(jobs) == 2 * len(plain) and len({j.job_id for j in jobs}) == len(jobs)
    nodes = nodes_of(jobs, config["placement"])
    assert all(nodes[j.job_id] == j.node_requested for j in jobs)
    for node in ("a100", "h100"):
        mine = [j for j in jobs if j.node_requested == node]
        assert [j.series_label for j in mine] == [f"{j.series_label}.on-{node}" for j in plain]
        assert [j.repeat for j in mine] == [j.repeat for j in plain]


def test_a_series_of_a_node_comparison_refuses_to_run_on_another_node():
    jobs = all_jobs(smoke(nodes=["a100", "h100"], compare_nodes=True))
    job = next(j for j in jobs if j.node_requested == "h100")
    check_on_its_node(job, "h100", "h100")  # its own node: runs
    with pytest.raises(WhichshotError, match="belongs to node h100 .* runs on Slurm node a100"):
        check_on_its_node(job, "a100", "a100")
    with pytest.raises(WhichshotError, match="runs on box, outside Slurm"):
        check_on_its_node(job, None, "box")
    check_on_its_node(all_jobs(smoke())[0], None, "box")  # no comparison: anywhere


def compared_nodes():
    """Cold and warm cells of one grid point on two nodes of another GPU and power limit."""
    nodes = {"n1": {"gpu_name": "NVIDIA A100", "gpu_power_limit_w": 400.0, "decode_tok_s": 40.0},
             "n2": {"gpu_name": "NVIDIA H100", "gpu_power_limit_w": 700.0, "decode_tok_s": 60.0}}  # fmt: skip
    rows = []
    for node, values in nodes.items():
        rows += series(cell(node_requested=node), [{}] * 3, hostname=node, slurm_node=node, **values)
        rows += series(cell(protocol="cold", node_requested=node), [{}] * 2, hostname=node, **values)
    return table(rows)


def test_node_ratios_compare_one_cell_on_two_nodes_and_every_such_figure_says_so():
    shots = compared_nodes()
    figures, caveats = compute_figures(shots, [], 0.7)
    fired = {c["caveat_id"] for c in caveats}
    node_of = shots.set_index("shot_id")["node_requested"]
    ratios = [f for f in figures if f.metric == "xnode_decode_ratio"]
    assert len(ratios) == 2  # warm and cold of n2 against n1
    assert all(f.value == pytest.approx(60.0 / 40.0) for f in ratios)
    assert {"nodes_compared", "machines_differ", "spans_machines"} <= fired
    for f in figures:
        across = bool(f.shot_ids) and node_of.loc[f.shot_ids].nunique() > 1
        assert ("nodes_compared" in f.caveat_ids) == across, f.figure_id
        if f.metric in ("decode_tok_s", "prefill_tok_s", "shots_ok") and f.cell_id:
            assert not across, f.figure_id  # a cell's own figure stays on its node
    assert all(set(node_of.loc[f.shot_ids]) == {"n1", "n2"} for f in ratios)


def test_the_report_sets_compared_nodes_side_by_side():
    figures, _ = compute_figures(compared_nodes(), [], 0.7)
    (nodes,) = build_tables(pd.DataFrame([f.as_row() for f in figures])).sides  # one engine: no engine table
    assert (nodes.sides, nodes.reference, nodes.head_axis) == (["n1", "n2"], "n1", "engine")
    assert {r["protocol"] for r in nodes.rows} == {"cold", "warm"}
    ratio = next(r for r in nodes.rows if r["protocol"] == "warm")["cells"][("n2", "xnode_decode_ratio")]
    assert ratio["value"] == pytest.approx(1.5)


def test_a_node_comparison_with_drafting_draws_and_renders_every_node_apart(tmp_path):
    from whichshot.report.plots import draw_plots
    from whichshot.report.render import render_report
    from whichshot.report.summary import render_summary

    rows = []
    for node, speed in (("n1", 40.0), ("n2", 60.0)):
        for mode, drafted in (
            ("none", {}),
            ("ngram", {"engine_draft_tokens": 10, "engine_draft_accepted": 7}),
        ):
            recall = cell(workload="verbatim_recall", spec_mode=mode, node_requested=node)
            values = {"decode_tok_s": speed, **drafted}
            rows += series(recall, [{}] * 3, hostname=node, **values)
            rows += series({**recall, "protocol": "cold"}, [{}] * 2, hostname=node, **values)
    shots = table(rows)
    figures, caveats = compute_figures(shots, [], 0.7)
    frame = pd.DataFrame([f.as_row() for f in figures])
    plots = draw_plots(frame, tmp_path)
    drawn = {p.name: p for p in plots}
    assert drawn["acceptance_real_synthetic"].png and drawn["workload_modes"].png
    html = render_report(frame, pd.DataFrame(caveats), shots, {"builds": [], "models": []}, plots, "t")
    assert 'id="nodes"' in html and "Nodes side by side" in html and "eng on n2" in html
    summary = render_summary(frame, pd.DataFrame(caveats), "t")
    assert "## Nodes side by side" in summary and "n2: decode vs n1" in summary


def test_a_slower_clocked_node_is_not_a_clock_drop_of_the_faster_one():
    rows = []
    for node, clock in (("n1", 1410.0), ("n2", 1980.0)):
        steady = {"sm_clock_median_mhz": clock, "sm_clock_min_mhz": clock - 5, "thermal_throttle_seen": False}
        rows += series(cell(node_requested=node), [{}] * 3, hostname=node, **steady)
    figures, caveats = compute_figures(table(rows), [], 0.7)
    best = sorted(f.value for f in figures if f.metric == "sm_clock_best_median_mhz")
    assert best == [1410.0, 1980.0]  # one best clock per node
    assert "clock_dropped_thermal_normal" not in {c["caveat_id"] for c in caveats}
