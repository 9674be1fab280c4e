"""A new engine kind is one module: tests/echo_engine.py adds one (config keys and checks, mode
settings, warm-ups, a caveat, its server) and a real pipeline run measures it, with nothing else
changed."""

import copy
import json
import subprocess
import sys

import pandas as pd
import pytest

from tests.pipeline import load_config, run_pipeline
from whichshot.config import check_config
from whichshot.errors import WhichshotError

pytestmark = pytest.mark.e2e


def echo_config() -> dict:
    config = load_config("smoke")
    config["run_id"] = "echo"
    config["engine_modules"] = ["tests.echo_engine"]
    config["engines"] = {"echo": {"kind": "echo", "greeting": "hi"}}
    config["prompts"] = {"lengths": [32]}
    config["protocol"] |= {"output_tokens": 8, "cold_processes": 1, "warm_shots": 3, "context_tokens": [512],
                           "engine_warmup": ["on"]}  # fmt: skip
    config["bench"] = {"enabled": False}
    return config


def test_the_config_check_knows_the_kind_from_its_module_alone():
    filled = check_config(copy.deepcopy(echo_config()))
    assert filled["engines"]["echo"]["threads"] == 1  # the kind's own default, from its schema
    wrong = echo_config()
    wrong["engines"]["echo"]["volume"] = 11
    with pytest.raises(WhichshotError, match=r"invalid config: engines\.echo: unknown key"):
        check_config(wrong)
    blank = echo_config()
    blank["engines"]["echo"]["greeting"] = " "
    with pytest.raises(WhichshotError, match=r"engines\.echo\.greeting: must not be blank"):
        check_config(blank)


def test_without_its_module_the_kind_is_unknown():
    # A fresh interpreter: this process may already hold the echo kind from another test.
    without = echo_config()
    without.pop("engine_modules")
    check = "import json, sys; from whichshot.config import check_config; check_config(json.load(sys.stdin))"
    result = subprocess.run([sys.executable, "-c", check], input=json.dumps(without), capture_output=True,
                            text=True, check=False)  # fmt: skip
    assert result.returncode != 0 and "engines.echo.kind" in result.stderr, result.stderr[-2000:]


def test_a_pipeline_measures_the_new_kind(tmp_path):
    result = run_pipeline(tmp_path, echo_config(), "results/caveats.parquet")  # the shots, their caveats
    assert result.returncode == 0, result.stderr[-4000:]
    shots = pd.read_parquet(tmp_path / "results" / "shots.parquet")
    assert set(shots["engine_kind"]) == {"echo"} and (shots["status"] == "ok").all()
    assert (shots["output_tokens"] == 8).all() and set(shots["engine_warmup_run"]) == {
        "one decode before ready"
    }
    caveats = pd.read_parquet(tmp_path / "results" / "caveats.parquet").set_index("caveat_id")
    assert len(caveats.loc["echo_is_no_model", "figure_ids"]) > 0  # its own caveat reached figures
