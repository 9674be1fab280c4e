"""The shipped default builds its workload prompts with the real model's tokenizer.

A dry run cannot see this: the edit's file is cut to fit document_tokens in the model's own tokens
when the prompts are built (a checkpoint), so a default whose documents are too short for two whole
functions passes every check until a user's first run stops there.
"""

import json

import pytest
import yaml

from tests.pipeline import REPO, run_pipeline

pytestmark = pytest.mark.e2e


def test_the_default_config_builds_every_workload_prompt(tmp_path):
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["claims"] = []  # read relative to the repository, not this scratch folder; not built here
    (model,) = config["workloads"]["models"]
    engine = next(iter(config["engines"]))
    target = f"results/prompts/{engine}/{model}.json"
    result = run_pipeline(tmp_path, config, target)
    assert result.returncode == 0, result.stderr[-4000:]
    prompts = json.loads((tmp_path / target).read_text())
    expected = {
        f"{name}-{kind}"
        for name in config["workloads"]["names"]
        for kind in config["workloads"]["text_kinds"]
    }
    assert set(prompts["workloads"]) == expected
