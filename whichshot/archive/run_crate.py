"""ro-crate-metadata.json for an archived run: a Workflow Run RO-Crate (Process, Workflow and
Workflow RO-Crate profiles) written with the `rocrate` package. The Snakefile is the main
workflow; one CreateAction says which run of it made which results from which inputs."""

import datetime as dt
from pathlib import Path
from typing import Any

import pandas as pd
import snakemake
from rocrate.model.contextentity import ContextEntity
from rocrate.rocrate import ROCrate

WFRUN_PROFILES = {
    "https://w3id.org/ro/wfrun/process/0.5": "Process Run Crate",
    "https://w3id.org/ro/wfrun/workflow/0.5": "Workflow Run Crate",
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0": "Workflow RO-Crate",
}
LICENSE = "https://spdx.org/licenses/Apache-2.0"
FORMATS = {
    ".parquet": "application/vnd.apache.parquet", ".html": "text/html", ".md": "text/markdown",
    ".png": "image/png", ".json": "application/json", ".yaml": "application/yaml", ".yml": "application/yaml",
    ".py": "text/x-python", ".smk": "text/x-snakemake", ".rst": "text/x-rst", ".jsonl": "application/jsonl",
    ".j2": "text/x-jinja2", ".txt": "text/plain", ".toml": "application/toml",
}  # fmt: skip
# Result files that are the workflow's declared outputs (FormalParameters of the workflow).
DECLARED_OUTPUTS = {
    "results/shots.parquet": "one row per shot",
    "results/telemetry.parquet": "every raw telemetry sample",
    "results/figures.parquet": "every number the report shows, with provenance",
    "results/caveats.parquet": "the caveats that fired on this run",
    "results/report/index.html": "the self-contained report",
    "results/report/summary.md": "the report's headline tables in Markdown",
}


def write_run_crate(root: Path, config: dict[str, Any], results: list[Path], source: list[Path]) -> None:
    """Describe everything under root (results, source, config/config.yaml, environment.json)."""
    # RO-Crate 1.1 with Workflow RO-Crate 1.0: the versions the Workflow Run Crate 0.5 profiles build on.
    crate = ROCrate(version="1.1")
    run_id = config["run_id"]
    _describe_root(crate, run_id)
    workflow = crate.add_workflow(
        root / "Snakefile", "Snakefile", main=True, lang="snakemake", lang_version=snakemake.__version__
    )
    workflow["name"] = "whichshot"
    workflow["license"] = crate.get(LICENSE)
    for relative in source:
        if relative.as_posix() != "Snakefile":
            _add_file(crate, root, relative)
    config_file = _add_file(crate, root, Path("config/config.yaml"), "the resolved config of this run")
    environment = _add_file(crate, root, Path("environment.json"),
                            "OS, CPU, GPU, driver, power limit read back, Python packages")  # fmt: skip
    outputs = [
        _add_file(crate, root, relative, DECLARED_OUTPUTS.get(relative.as_posix(), ""))
        for relative in results
    ]
    _formal_parameters(crate, workflow, config_file, outputs)
    start, end = _run_times(root / "results" / "shots.parquet")
    crate.add_action(
        workflow,
        identifier=f"#run-{run_id}",
        object=[config_file],
        result=[*outputs, environment],
        properties={
            "name": f"whichshot run {run_id}",
            "startTime": start,
            "endTime": end,
            "actionStatus": "http://schema.org/CompletedActionStatus",
        },
    )
    crate.root_dataset["mentions"] = crate.get(f"#run-{run_id}")
    crate.write(root)


def _describe_root(crate: ROCrate, run_id: str) -> None:
    crate.name = f"whichshot run {run_id}"
    crate.description = (
        "LLM-inference speed measurements under a cold/warm shot protocol, with every reported number "
        "labelled measured / engine-reported / derived / inferred / assumed, its caveats, the engine "
        "builds, the environment and the workflow that produced them. Model output text in "
        "results/shots.parquet is subject to the licences of the models in results/models/."
    )
    crate.datePublished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    crate.add(
        ContextEntity(crate, LICENSE, properties={"@type": "CreativeWork", "name": "Apache License 2.0"})
    )
    crate.license = crate.get(LICENSE)
    for uri, name in WFRUN_PROFILES.items():
        profile = crate.add(ContextEntity(crate, uri, properties={
            "@type": "CreativeWork", "name": name, "version": uri.rsplit("/", 1)[-1]}))  # fmt: skip
        crate.root_dataset.append_to("conformsTo", profile)


def _add_file(crate: ROCrate, root: Path, relative: Path, description: str = ""):
    path = root / relative
    properties = {"contentSize": str(path.stat().st_size)}
    if relative.suffix in FORMATS:
        properties["encodingFormat"] = FORMATS[relative.suffix]
    if description:
        properties["description"] = description
    return crate.add_file(path, relative.as_posix(), properties=properties)


def _formal_parameters(crate: ROCrate, workflow, config_file, outputs) -> None:
    """The config as the workflow's input, the declared result files as its outputs."""
    param = crate.add_formal_parameter("config", "File", identifier="#param-config",
                                       description="workflow config (config/config.yaml)")  # fmt: skip
    workflow.append_to("input", param)
    config_file.append_to("exampleOfWork", param)
    for output in outputs:
        if output.id not in DECLARED_OUTPUTS:
            continue
        name = Path(output.id).name
        param = crate.add_formal_parameter(name, "File", identifier=f"#param-{name}",
                                           description=DECLARED_OUTPUTS[output.id])  # fmt: skip
        workflow.append_to("output", param)
        output.append_to("exampleOfWork", param)


def _run_times(shots_path: Path) -> tuple[str | None, str | None]:
    """First shot start and last shot end (UTC, ISO 8601), from the shots themselves."""
    if not shots_path.is_file():
        return None, None
    shots = pd.read_parquet(shots_path, columns=["wall_start_utc", "e2e_s"]).dropna(subset=["wall_start_utc"])
    if shots.empty:
        return None, None
    starts = pd.to_datetime(shots["wall_start_utc"], utc=True)
    ends = starts + pd.to_timedelta(shots["e2e_s"].fillna(0), unit="s")
    return starts.min().isoformat(timespec="seconds"), ends.max().isoformat(timespec="seconds")
