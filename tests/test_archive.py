"""The run archive: unpacks, its manifest verifies (and catches tampering), its RO-Crate parses."""

import json
import tarfile

import pytest
import yaml
from rocrate.rocrate import ROCrate

from tests.report_run import KEPT_VARIABLE, SECRET_VARIABLE, finished_report_run
from whichshot.archive.bundle import MANIFEST, verify_manifest
from whichshot.archive.run_environment import relevant_variables

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    run = finished_report_run(tmp_path_factory)
    target = tmp_path_factory.mktemp("archive")
    with tarfile.open(run / "results" / "archive" / "report.tar.gz") as archive:
        archive.extractall(target, filter="data")
    return target / "report"


def test_archive_holds_tables_report_config_builds_and_environment(unpacked):
    for relative in ("results/shots.parquet", "results/telemetry.parquet", "results/figures.parquet",
                     "results/caveats.parquet", "results/report/index.html", "results/report/summary.md",
                     "results/engines/llama_cpp/build.json", "results/models/smollm2_135m.json",
                     "config/config.yaml", "environment.json", "Snakefile", "README.md", "docs/protocol.md",
                     MANIFEST):  # fmt: skip
        assert (unpacked / relative).is_file(), relative
    config = yaml.safe_load((unpacked / "config" / "config.yaml").read_text())
    assert config["run_id"] == "report" and config["protocol"]["warm_fraction"] == 0.7  # a schema default
    environment = json.loads((unpacked / "environment.json").read_text())
    assert {"whichshot", "pandas", "rocrate"} <= set(environment["python_packages"])
    assert environment["gpus"]["devices"] or environment["gpus"]["not_measured"].startswith("no NVIDIA")
    assert environment["environment_variables"][KEPT_VARIABLE[0]] == KEPT_VARIABLE[1]
    assert SECRET_VARIABLE[1] not in (unpacked / "environment.json").read_text()


def test_manifest_verifies_and_catches_tampering(unpacked):
    assert verify_manifest(unpacked) == []
    listed = (unpacked / MANIFEST).read_text()
    assert "  results/figures.parquet\n" in listed and "  ro-crate-metadata.json\n" in listed
    summary = unpacked / "results" / "report" / "summary.md"
    original = summary.read_bytes()
    summary.write_bytes(original + b"\nedited")
    (unpacked / "stray.txt").write_text("x")
    try:
        assert verify_manifest(unpacked) == ["not listed: stray.txt", "altered: results/report/summary.md"]
    finally:
        summary.write_bytes(original)
        (unpacked / "stray.txt").unlink()


def test_ro_crate_is_a_workflow_run_crate(unpacked):
    crate = ROCrate(unpacked)
    workflow = crate.mainEntity
    assert workflow.id == "Snakefile" and "ComputationalWorkflow" in workflow.type
    assert workflow["programmingLanguage"].id.endswith("#snakemake")
    profiles = {p.id for p in crate.root_dataset["conformsTo"]}
    assert "https://w3id.org/ro/wfrun/workflow/0.5" in profiles
    (action,) = crate.get_by_type("CreateAction")
    assert action["instrument"] is workflow
    assert action["startTime"] <= action["endTime"]
    results = {entity.id for entity in action["result"]}
    assert {"results/figures.parquet", "results/report/index.html"} <= results
    assert [e.id for e in action["object"]] == ["config/config.yaml"]
    for entity in crate.data_entities:
        assert (unpacked / entity.id).is_file(), entity.id


def test_environment_variables_are_chosen_then_redacted():
    env = {"OMP_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": "0", "HOME": "/root",
           "WHICHSHOT_API_KEY": "k", "SLURM_JOB_ID": "7", "HF_TOKEN": "t"}  # fmt: skip
    kept = {"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "2", "SLURM_JOB_ID": "7"}
    assert relevant_variables(env) == kept
