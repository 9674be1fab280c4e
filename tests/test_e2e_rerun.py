"""What re-measures what, on a finished run, as Snakemake itself plans it (docs/protocol.md): settings
read only by the figures and the report, a new run_id or a rebuild of the same prompts re-measure no
series; a new speculative mode adds only its own; an output budget re-measures exactly the series it
bounds; a user text refused while the prompts are rebuilt deletes nothing a series depends on.

Snakemake's own plan is read from `--summary` (a table: output file, rule, status, plan), not from
the wording of a dry run. Each change is made to a copy of one finished run, so the tests are free
of each other."""

import copy
import shutil

import pytest

from tests.pipeline import REPO, load_config, run_pipeline
from whichshot.config import with_defaults
from whichshot.measure.grid import all_jobs
from whichshot.prepare.user_texts import pin_of
from whichshot.prepare.workloads import pydoc_sections
from whichshot.shots.axes import BASE_WORKLOAD

pytestmark = pytest.mark.e2e

PENDING = "update pending"


def _config(notes) -> dict:
    """A small finished run: the grid (cold and warm) cut from the user's notes, one workload, no
    drafting, llama-bench off."""
    config = load_config("smoke")
    config["run_id"] = "rerun"
    config["prompts"] = {"lengths": [64], "corpus": {"path": str(notes), "sha256": pin_of(notes)}}
    config["protocol"] |= {"output_tokens": 8, "cold_processes": 1, "warm_shots": 2, "context_tokens": [512]}
    config["workloads"] = {"names": ["explain"], "text_kinds": ["real"], "max_output_tokens": 8,
                           "context_tokens": 1024, "cold_processes": 1, "warm_shots": 2}  # fmt: skip
    config["spec_modes"] = {"none": {}}
    config["bench"] = {"enabled": False}
    return config


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    notes = tmp_path_factory.mktemp("notes")
    for title, text in pydoc_sections(["assert", "pass", "del", "return", "global", "continue"]):
        (notes / f"{title}.md").write_text(f"# {title}\n\n{text}\n")
    config = _config(notes)
    workdir = tmp_path_factory.mktemp("rerun")
    result = run_pipeline(workdir, config)
    assert result.returncode == 0, result.stderr[-4000:]
    return {"workdir": workdir, "config": config, "notes": notes}


def _copy(finished, tmp_path):
    """A copy of the finished run (dates kept: Snakemake compares them)."""
    workdir = tmp_path / "run"
    shutil.copytree(finished["workdir"], workdir, symlinks=True)
    return workdir


def _series(config: dict, workload: str | None = None) -> set[str]:
    """The config's series (those of one workload, if given)."""
    jobs = all_jobs(with_defaults(copy.deepcopy(config)))
    return {job.job_id for job in jobs if workload in (None, job.workload)}


def _plan(workdir, config) -> dict[str, tuple[str, str]]:
    """Snakemake's plan for `config` on the run in `workdir`: output file -> (rule, plan)."""
    result = run_pipeline(workdir, config, "--summary")
    assert result.returncode == 0, result.stderr[-4000:]
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("output_file\t"))
    columns = lines[header].split("\t")
    rows = [dict(zip(columns, line.split("\t"), strict=True)) for line in lines[header + 1 :] if "\t" in line]
    return {row["output_file"]: (row["rule"], row["plan"]) for row in rows}


def _remeasured(plan: dict[str, tuple[str, str]]) -> set[str]:
    """The series whose shots the plan would measure (again)."""
    prefix = "results/shots/"
    return {
        path.removeprefix(prefix).removesuffix(".jsonl")
        for path, (rule, pending) in plan.items()
        if rule == "run_series" and path.startswith(prefix) and pending == PENDING
    }


def _pending_rules(plan: dict[str, tuple[str, str]]) -> set[str]:
    return {rule for rule, pending in plan.values() if pending == PENDING}


def _shot_dates(workdir) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (workdir / "results" / "shots").glob("*.jsonl")}


def test_the_finished_run_plans_nothing(finished):
    plan = _plan(finished["workdir"], finished["config"])
    assert _pending_rules(plan) == set()
    assert {path for path, (rule, _) in plan.items() if rule == "run_series" and "/shots/" in path}


def _set(section: str, key: str, value):
    def change(config: dict) -> None:
        config.setdefault(section, {})[key] = value

    return change


@pytest.mark.parametrize(
    ("change", "reruns"),
    [
        (_set("protocol", "warm_fraction", 0.5), "compute_figures"),
        (lambda c: c.update(claims=[str(REPO / "claims" / "seed-000.yaml")]), "check_claims"),
        (_set("report", "show_text", True), "render_report"),
        (_set("bench", "repetitions", 7), None),  # llama-bench is off: nothing reads it
        (lambda c: c.update(run_id="relabelled"), "aggregate_shots"),
        (_set("server", "ready_timeout_s", 30), None),  # a timeout changes no finished shot
        (_set("server", "shot_timeout_s", 60), None),
        (lambda c: c["models"]["smollm2_135m"].update(description="another text"), None),
    ],
    ids=[
        "warm_fraction",
        "claims_file",
        "report",
        "bench_repetitions_off",
        "run_id",
        "ready_timeout",
        "shot_timeout",
        "model_description",
    ],
)
def test_what_figures_and_the_report_read_re_measures_nothing(finished, change, reruns):
    config = copy.deepcopy(finished["config"])
    change(config)
    plan = _plan(finished["workdir"], config)
    assert _remeasured(plan) == set()
    if reruns:  # the change is seen: the step that reads it runs again
        assert reruns in _pending_rules(plan)
    else:
        assert _pending_rules(plan) == set()
    assert not {"probe_hardware", "probe_kernels_after", "fetch_model"} & _pending_rules(plan)


def test_a_dry_runs_estimate_counts_the_series_snakemake_plans(finished):
    config = copy.deepcopy(finished["config"])
    config["protocol"]["output_tokens"] = 12  # re-measures the grid's series
    planned = _remeasured(_plan(finished["workdir"], config))
    dry = run_pipeline(finished["workdir"], config, "--dry-run")
    assert dry.returncode == 0, dry.stderr[-4000:]
    line = next(line for line in dry.stderr.splitlines() if line.startswith("Estimated duration: "))
    assert planned and f": {len(planned)} series, about " in line


def test_a_change_to_the_figures_code_derives_the_figures_again(finished, tmp_path, monkeypatch):
    """The figures package's code is a param of compute_figures (its id): a copy of the project whose
    figures code differs plans compute_figures and what follows, and no series."""
    project = tmp_path / "project"
    shutil.copytree(
        REPO, project, ignore=shutil.ignore_patterns("results", ".git", "__pycache__", ".snakemake")
    )
    module = project / "whichshot" / "figures" / "statistic.py"
    module.write_text(module.read_text() + "\n# a fix\n")
    workdir = _copy(finished, tmp_path)
    monkeypatch.setattr("tests.pipeline.REPO", project)
    plan = _plan(workdir, finished["config"])
    assert "compute_figures" in _pending_rules(plan) and _remeasured(plan) == set()


def test_a_new_spec_mode_measures_its_own_series_only(finished):
    config = copy.deepcopy(finished["config"])
    config["spec_modes"]["ngram_simple"] = {
        "type": "ngram-simple",
        "options": {"spec-ngram-simple-size-n": 4, "spec-ngram-simple-size-m": 16},
    }
    added = _series(config) - _series(finished["config"])
    assert added and all(".ngram_simple." in job for job in added)
    assert _remeasured(_plan(finished["workdir"], config)) == added


def test_an_output_budget_re_measures_every_series_of_the_grid_and_no_other(finished):
    config = copy.deepcopy(finished["config"])
    config["protocol"]["output_tokens"] = 12
    grid = _series(config, BASE_WORKLOAD)
    assert grid and grid != _series(config)  # the workload's series keep their own budget
    assert _remeasured(_plan(finished["workdir"], config)) == grid


def test_prompts_rebuilt_as_they_were_re_measure_nothing(finished, tmp_path):
    workdir = _copy(finished, tmp_path)
    prompts = workdir / "results" / "prompts" / "llama_cpp" / "smollm2_135m.json"
    before, prompts_before = _shot_dates(workdir), prompts.stat().st_mtime_ns
    result = run_pipeline(workdir, finished["config"], "--forcerun", "build_prompts")
    assert result.returncode == 0, result.stderr[-4000:]
    assert prompts.stat().st_mtime_ns != prompts_before  # rebuilt
    assert _shot_dates(workdir) == before  # and no series measured again
    assert _pending_rules(_plan(workdir, finished["config"])) == set()


def test_a_user_text_refused_while_prompts_are_rebuilt_loses_no_series(finished, tmp_path):
    workdir = _copy(finished, tmp_path)
    series_prompts = {p: p.stat().st_mtime_ns for p in (workdir / "results" / "prompts").glob("*/*/*.json")}
    before = _shot_dates(workdir)
    note = next(finished["notes"].iterdir())
    text = note.read_text()
    try:
        note.write_text(text + "\nchanged after it was pinned\n")
        refused = run_pipeline(workdir, finished["config"], "--forcerun", "build_prompts")
    finally:
        note.write_text(text)
    assert refused.returncode != 0 and "refusing to use it" in refused.stderr
    assert series_prompts and {p: p.stat().st_mtime_ns for p in series_prompts} == series_prompts
    assert _shot_dates(workdir) == before
    again = run_pipeline(workdir, finished["config"])  # the text as pinned: a good run
    assert again.returncode == 0, again.stderr[-4000:]
    assert _shot_dates(workdir) == before
    assert _pending_rules(_plan(workdir, finished["config"])) == set()


def test_a_new_prompt_length_measures_its_own_series_only(finished, tmp_path):
    """The prompts are rebuilt first (a checkpoint: until then Snakemake cannot tell which series'
    prompts changed, and a dry run lists every series of the model)."""
    workdir = _copy(finished, tmp_path)
    config = copy.deepcopy(finished["config"])
    config["prompts"]["lengths"] = [64, 96]
    rebuilt = run_pipeline(workdir, config, "--until", "build_prompts")
    assert rebuilt.returncode == 0, rebuilt.stderr[-4000:]
    added = _series(config) - _series(finished["config"])
    assert added and all(".p96." in job for job in added)
    assert _remeasured(_plan(workdir, config)) == added
