"""The user's own texts end to end on the real engine (issue 17): the protocol grid's prompts cut
from a folder of the user's files, the recall run on them and the edit run on the user's own
Python file; every row names the pin of the text it came from."""

import json
import shutil
import textwrap as textwrap_module

import pandas as pd
import pytest
import yaml

from tests.pipeline import load_config, run_pipeline
from whichshot.prepare.user_texts import pin_of
from whichshot.prepare.workloads import pydoc_sections

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    mine = tmp_path_factory.mktemp("my-texts")
    notes = mine / "notes"
    notes.mkdir()
    for title, text in pydoc_sections(["assert", "pass", "del", "return", "global", "continue"]):
        (notes / f"{title}.md").write_text(f"# {title}\n\n{text}\n")
    source = mine / "my_module.py"
    shutil.copy(textwrap_module.__file__, source)
    corpus = {"path": str(notes), "sha256": pin_of(notes)}
    edit = {"path": str(source), "sha256": pin_of(source)}
    config = load_config("smoke")
    config["run_id"] = "user-texts"
    config["prompts"] = {"lengths": [64], "corpus": corpus}
    config["protocol"] |= {"output_tokens": 8, "cold_processes": 1, "warm_shots": 0, "context_tokens": [512]}
    config["workloads"] = {"names": ["edit_file", "verbatim_recall"], "text_kinds": ["real"], "texts": corpus,
                           "edit_source": edit, "document_tokens": 320, "max_output_tokens": 400,
                           "context_tokens": 1280, "cold_processes": 1, "warm_shots": 0}  # fmt: skip
    config["bench"] = {"enabled": False}
    workdir = tmp_path_factory.mktemp("user-texts-run")
    result = run_pipeline(workdir, config, "results/shots.parquet")  # the rows and prompts are checked
    assert result.returncode == 0, result.stderr[-4000:]
    return {"workdir": workdir, "corpus": corpus, "edit": edit, "notes": notes, "source": source}


def test_every_row_names_the_pin_of_the_users_text(user_run):
    shots = pd.read_parquet(user_run["workdir"] / "results" / "shots.parquet")
    assert (shots["status"] == "ok").all() and len(shots) == 3
    by_workload = shots.set_index("workload")["corpus_sha256"].to_dict()
    assert by_workload == {
        "continue_text": user_run["corpus"]["sha256"],
        "verbatim_recall": user_run["corpus"]["sha256"],
        "edit_file": user_run["edit"]["sha256"],
    }
    assert shots.set_index("workload").loc["continue_text", "corpus"] == "user_files:notes"


def test_the_prompts_hold_the_users_text(user_run):
    prompts = json.loads(
        (user_run["workdir"] / "results" / "prompts" / "llama_cpp" / "smollm2_135m.json").read_text()
    )
    mine = "\n\n".join(p.read_text().strip("\n") for p in sorted(user_run["notes"].iterdir()))
    assert prompts["prompts"]["64A"]["text"] in mine
    recall = prompts["workloads"]["verbatim_recall-real"]
    assert recall["source"]["corpus"] == "user_files" and recall["checks"]["reference_text"] in mine
    edit = prompts["workloads"]["edit_file-real"]
    assert edit["source"]["file_sha256"] == user_run["edit"]["sha256"]
    assert edit["checks"]["rename"]["file"] in user_run["source"].read_text()


def test_a_changed_user_file_is_refused_before_any_measurement(user_run):
    config_path = user_run["workdir"] / "config" / "config.yaml"
    note = next(user_run["notes"].iterdir())
    note.write_text(note.read_text() + "\nchanged\n")
    result = run_pipeline(user_run["workdir"], yaml.safe_load(config_path.read_text()),
                          "results/shots.parquet", "--forcerun", "build_prompts")  # fmt: skip
    assert result.returncode != 0
    assert "sha256 of" in result.stderr and "refusing to use it" in result.stderr
    shots = pd.read_parquet(user_run["workdir"] / "results" / "shots.parquet")
    assert len(shots) == 3  # what was measured stays
