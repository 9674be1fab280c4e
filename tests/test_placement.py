"""Many nodes (issue 21): which node each series is pinned to, what Slurm is asked for, and the
caveats a figure gets when its shots come from more than one machine or the machines differ."""

import pytest

from tests.pipeline import load_config
from tests.shot_tables import cell, series, table
from whichshot.config import check_config
from whichshot.errors import WhichshotError
from whichshot.figures.table import compute_figures
from whichshot.measure.grid import all_jobs
from whichshot.measure.placement import nodes_of, slurm_extra

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
        by_length.setdefault(job.prompt_tokens, set()).add(nodes[job.job_id])
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
