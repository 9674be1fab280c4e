"""Cluster submission for real: the smoke grid through `snakemake --executor slurm` on a private Slurm
of three nodes simulated on this machine (tests/slurm_cluster.py), using workflow/profiles/slurm
adapted to it, with each prompt length's series pinned to one node (placement.nodes).

What must hold: every series ran on its placement node; one node never ran two measurement jobs at
once (Slurm's --exclusive, from Slurm's records and from the shots' own times); different nodes
did measure at the same time; no figure rests on shots of two nodes; the shot table has the local
run's schema. A second workflow, submitted at the same time as two users' would be, compares two
nodes (placement.compare_nodes): every series ran on each, each cell's figures stay on one node,
every figure that sets one node against the other says so (nodes_compared), and no node ran two
measurements at once across both workflows. The simulated nodes share this machine's two cores,
so their speeds are not comparable, and the figures say so (host_busy): this proves scheduling and
placement, not speed."""

import os
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.pipeline import load_config, run_pipeline
from tests.slurm_cluster import (
    FAKE_GPUS,
    SlurmCluster,
    jobs_on,
    local_profile,
    measurement_jobs,
    most_at_once,
    overlapping_jobs,
    overlapping_windows,
    shot_windows,
    start_cluster,
    unavailable_reason,
)
from whichshot.config import check_config
from whichshot.measure.grid import all_jobs
from whichshot.measure.placement import nodes_of
from whichshot.tables import arrow_schema, record_schema

pytestmark = pytest.mark.e2e
NODES = 3
LENGTHS = [64, 128, 200]  # one placement group per node


def nodes_config(nodes: list[str]) -> dict:
    """The smoke grid at three prompt lengths, each length's cold and warm series on one node (six
    measurement jobs, two per node). Every Slurm job costs ~12 s of submission and status polling
    (the executor's first check 1 s after submission, then 10 s more per check)."""
    config = load_config("smoke")
    config["prompts"]["lengths"] = LENGTHS
    config["placement"] = {"nodes": nodes, "by": ["prompt_tokens_requested"]}
    config["bench"]["enabled"] = False  # llama-bench brackets add minutes and nothing Slurm-specific
    # The decode ceilings are read (each node's copy bandwidth); the engine-kernel probe would time
    # only the prefill ceiling's peak, and its pass after the grid is one more Slurm job per node.
    config["bench"]["kernel_probe"] = {"enabled": False}
    # The fewest shots a cold/warm comparison takes: shorter jobs, fewer of the executor's
    # ever longer status checks (results/reference/slurm_local_nodes ran 2 cold and 3 warm).
    config["protocol"].update(cold_processes=1, warm_shots=2)
    return config


def targets() -> list[str]:
    """The measurement jobs, the shot table and the figures the pipeline computes from it."""
    return ["results/shots.parquet", "results/figures.parquet"]


def overlapping_on_one_node(jobs: list[dict[str, str]]) -> list[tuple[str, str]]:
    """Pairs of measurement jobs of one node whose Slurm start/end times overlap."""
    return [pair for node in {j["nodes"] for j in jobs} for pair in overlapping_jobs(jobs_on(jobs, node))]


@pytest.fixture(scope="module")  # the daemons must be gone before other modules count processes
def slurm():
    reason = unavailable_reason(NODES)
    if reason is not None:
        pytest.skip(reason)
    cluster = start_cluster(NODES)
    print(f"slurm bring-up ({NODES} nodes): {cluster.bring_up_s:.2f} s")
    yield cluster
    cluster.stop()


def _job_logs(workdir: Path) -> str:
    """The tail of each Slurm job log the executor kept (it keeps those of failed jobs)."""
    logs = sorted((workdir / ".snakemake" / "slurm_logs").rglob("*.log"))
    return "".join(f"\n--- {log.name}\n" + log.read_text(errors="replace")[-1500:] for log in logs)


def run_through(slurm: SlurmCluster, workdir: Path, profile: Path, config: dict) -> Path:
    """The config's figures through the Slurm profile on the private cluster; the workdir."""
    t0 = time.monotonic()
    result = run_pipeline(workdir, config, *targets(), profile=profile, env=slurm.env, timeout_s=900)
    print(f"slurm run ({workdir.name}): {time.monotonic() - t0:.1f} s")
    assert result.returncode == 0, result.stderr[-3000:] + _job_logs(workdir) + slurm.logs()
    return workdir


@pytest.fixture(scope="module")
def slurm_runs(slurm: SlurmCluster, tmp_path_factory) -> dict:
    """The placed grid and the node comparison, submitted at once from two workdirs (the time of
    one run, and a check that two workflows on one cluster still never share a node)."""
    configs = {"placed": nodes_config(slurm.nodes), "compared": compare_config(slurm.nodes)}
    places = {name: tmp_path_factory.mktemp(f"slurm_{name}") for name in configs}
    profile = local_profile(tmp_path_factory.mktemp("slurm_profile"), nodes=NODES, first_check_s=1)
    with ThreadPoolExecutor(len(configs)) as pool:
        done = [pool.submit(run_through, slurm, places[name], profile, configs[name]) for name in configs]
        for future in done:
            future.result()
    return {"workdirs": places, "configs": configs, "jobs": measurement_jobs(slurm.jobs())}


def jobs_of(config: dict, jobs: list[dict[str, str]]) -> list[dict[str, str]]:
    """The measurement jobs that ran this config's series (a job's comment names its series)."""
    series = {job.job_id for job in all_jobs(check_config(config))}
    return [j for j in jobs if j["comment"].split("_wildcards_", 1)[-1] in series]


@pytest.fixture(scope="module")
def slurm_run(slurm_runs):
    config = slurm_runs["configs"]["placed"]
    placed = nodes_of(all_jobs(check_config(config)), config["placement"])
    return {
        "workdir": slurm_runs["workdirs"]["placed"],
        "jobs": jobs_of(config, slurm_runs["jobs"]),
        "placed": placed,
    }


@pytest.fixture(scope="module")
def slurm_shots(slurm_run) -> pd.DataFrame:
    return pd.read_parquet(slurm_run["workdir"] / "results" / "shots.parquet")


def test_every_series_ran_in_its_own_slurm_job_on_its_placement_node(slurm_run, slurm_shots):
    assert len(slurm_shots) > 0 and (slurm_shots["status"] == "ok").all()
    assert (slurm_shots["slurm_node"] == slurm_shots["job_id"].map(slurm_run["placed"])).all()
    assert (slurm_shots["hostname"] == slurm_shots["slurm_node"]).all()  # the node's own host name
    assert slurm_shots["slurm_node"].nunique() == NODES
    series_jobs = {j["job_id"] for j in slurm_run["jobs"]}
    assert set(slurm_shots["slurm_job_id"]) == series_jobs
    assert slurm_shots.groupby("job_id")["slurm_job_id"].nunique().eq(1).all()
    assert slurm_shots["slurm_job_id"].nunique() == slurm_shots["job_id"].nunique()


def test_every_shot_records_the_gpu_slurm_gave_its_job(slurm_shots):
    # The profile asks for gpu: 1; each node's two GPUs are gres entries on /dev/null, /dev/zero.
    assert slurm_shots["slurm_gpus"].isin([str(i) for i in range(len(FAKE_GPUS))]).all()


def test_one_node_never_measured_twice_at_once(slurm_run, slurm_shots):
    jobs = slurm_run["jobs"]
    assert {j["state"] for j in jobs} == {"COMPLETED"}
    assert overlapping_on_one_node(jobs) == [], jobs
    # The simulated nodes share this machine's monotonic clock, so their shot times compare too.
    for _node, shots in slurm_shots.groupby("slurm_node"):
        windows = shot_windows(shots)
        assert len(windows) == 2 and overlapping_windows(windows) == [], windows


def test_different_nodes_measured_at_the_same_time(slurm_run, slurm_shots):
    assert most_at_once(slurm_run["jobs"]) >= 2, slurm_run["jobs"]
    windows = shot_windows(slurm_shots).join(slurm_shots.groupby("slurm_job_id")["slurm_node"].first())
    across = [
        (a, b)
        for (a, x), (b, y) in combinations(windows.iterrows(), 2)
        if x["slurm_node"] != y["slurm_node"] and x["start"] < y["end"] and y["start"] < x["end"]
    ]
    assert across, windows


def test_no_figure_of_a_cell_rests_on_two_nodes_and_what_pools_nodes_says_so(slurm_run, slurm_shots):
    results = slurm_run["workdir"] / "results"
    figures = pd.read_parquet(results / "figures.parquet")
    fired = set(pd.read_parquet(results / "caveats.parquet")["caveat_id"])
    node_of = slurm_shots.set_index("shot_id")["slurm_node"]
    spans = figures["shot_ids"].map(lambda ids: node_of.loc[list(ids)].nunique() > 1 if len(ids) else False)
    flagged = figures["caveat_ids"].map(lambda ids: "spans_machines" in ids)
    assert (spans == flagged).all()  # the caveat is on exactly the figures whose shots span nodes
    # Every figure of a cell, and every comparison of cells (cold/warm, a ratio), is of one node;
    # only run-wide pools (the shot count, client against engine over all cells) span them.
    assert figures.loc[spans, "protocol"].isna().all(), figures.loc[spans, "figure_id"].tolist()
    assert figures["protocol"].notna().sum() > 0 and "several_machines" in fired
    # Nodes on one host load each other while measuring side by side: the host-load caveat says so.
    assert "host_busy" in fired
    # Each node was probed on itself, and its cells run against its own peaks.
    ceilings = figures[figures["metric"] == "decode_ceiling_tok_s"]
    assert {node_of.loc[list(ids)].iloc[0] for ids in ceilings["shot_ids"]} == set(slurm_shots["slurm_node"])


def test_schema_equals_the_local_run_and_the_declared_schema(slurm_run, smoke_run):
    slurm_schema = pq.read_schema(slurm_run["workdir"] / "results" / "shots.parquet")
    local_schema = pq.read_schema(smoke_run["workdir"] / "results" / "shots.parquet")
    declared = arrow_schema(record_schema("shots"))
    assert slurm_schema.equals(local_schema, check_metadata=False)
    assert slurm_schema.equals(declared, check_metadata=False)


def compare_config(nodes: list[str]) -> dict:
    """One prompt length's warm series on each of two nodes: two measurement jobs, side by side (a
    cold series would add two more jobs and nothing the comparison does not already show)."""
    config = nodes_config(nodes)
    config["prompts"]["lengths"] = LENGTHS[:1]
    config["protocol"]["cold_processes"] = 0
    config["placement"] = {"nodes": nodes[:2], "compare_nodes": True}
    return config


@pytest.fixture(scope="module")
def compare_run(slurm: SlurmCluster, slurm_runs):
    results = slurm_runs["workdirs"]["compared"] / "results"
    return {
        "shots": pd.read_parquet(results / "shots.parquet"),
        "figures": pd.read_parquet(results / "figures.parquet"),
        "caveats": pd.read_parquet(results / "caveats.parquet"),
        "compared": slurm.nodes[:2],
        "jobs": jobs_of(slurm_runs["configs"]["compared"], slurm_runs["jobs"]),
    }


def test_a_node_comparison_runs_every_series_on_each_node_it_names(compare_run):
    shots, (first, second) = compare_run["shots"], compare_run["compared"]
    assert len(shots) > 0 and (shots["status"] == "ok").all()
    assert (shots["slurm_node"] == shots["node_requested"]).all() and (
        shots["hostname"] == shots["slurm_node"]
    ).all()
    per_node = shots.groupby("node_requested")["series_label"].agg(
        lambda labels: {x.rsplit(".on-", 1)[0] for x in labels}
    )
    assert set(per_node.index) == {first, second} and per_node[first] == per_node[second]
    for _node, rows in shots.groupby("node_requested"):
        assert overlapping_windows(shot_windows(rows)) == []
    assert {j["nodes"] for j in compare_run["jobs"]} == {first, second} and len(compare_run["jobs"]) == 2


def test_two_workflows_on_one_cluster_never_measure_on_one_node_at_once(slurm_runs):
    jobs = slurm_runs["jobs"]  # both workflows' measurement jobs
    assert {j["state"] for j in jobs} == {"COMPLETED"} and len(jobs) == 6 + 2
    assert overlapping_on_one_node(jobs) == [], jobs


def test_a_node_comparison_keeps_cells_on_one_node_and_says_where_it_compares_them(compare_run):
    shots, figures, (first, second) = compare_run["shots"], compare_run["figures"], compare_run["compared"]
    node_of = shots.set_index("shot_id")["node_requested"]
    spans = figures["shot_ids"].map(lambda ids: node_of.loc[list(ids)].nunique() > 1 if len(ids) else False)
    assert (spans == figures["caveat_ids"].map(lambda ids: "nodes_compared" in ids)).all()
    ratios = figures[figures["metric"].isin(["xnode_decode_ratio", "xnode_prefill_ratio"])]
    assert len(ratios) == 2 and ratios["value"].notna().all()  # decode and prefill
    assert (
        set(ratios["node_requested"]) == {second}
        and ratios["baseline_cell_id"].str.contains(f"on-{first}").all()
    )
    # Every other figure of a node's cells (its statistics, cold against warm) rests on that node alone.
    of_one_node = figures["node_requested"].notna() & ~figures["metric"].str.startswith("xnode_")
    assert of_one_node.any() and not spans[of_one_node].any()
    assert "nodes_compared" in set(compare_run["caveats"]["caveat_id"])
    # Each node's cells run against the peaks of a probe taken on that node.
    ceilings = figures[figures["metric"] == "decode_ceiling_tok_s"].set_index("node_requested")
    assert set(ceilings.index) == {first, second}
    for node in (first, second):
        assert f"on-{node}/cpu_copy_bandwidth_bytes_s" in list(ceilings.loc[node, "input_figure_ids"])


def test_local_shots_carry_no_slurm_fields(smoke_run):
    shots = pd.read_parquet(smoke_run["workdir"] / "results" / "shots.parquet")
    outer_job = os.environ.get("SLURM_JOB_ID")  # set only where pytest itself runs inside a Slurm job
    if outer_job is None:
        assert shots[["slurm_job_id", "slurm_node", "slurm_gpus"]].isna().all().all()
    else:
        assert (shots["slurm_job_id"] == outer_job).all()
