"""Malformed configs: each stops before any work with one line that names the field and the problem.
(tests/test_config.py holds twelve more; these cover the kinds it does not.)"""

import copy
import subprocess
import sys

import pytest

from tests.pipeline import REPO, load_config
from whichshot.config import check_config, check_config_file
from whichshot.errors import WhichshotError

SMOKE = load_config("smoke")
SMOLLM = SMOKE["models"]["smollm2_135m"]


def _set(config: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    node = config
    for key in parents:
        node = node.setdefault(key, {})
    if value is KeyError:
        del node[last]
    else:
        node[last] = value


# (what is wrong, {field path: new value}, the line's expected content after "invalid config: ")
BAD = [
    ("unknown workload", {"workloads.names": ["summarize"]}, "workloads.names.0: 'summarize' is not one of"),
    (
        "negative output",
        {"protocol.output_tokens": -5},
        "protocol.output_tokens: -5 is less than the minimum of 2",
    ),
    ("string prompt length", {"prompts.lengths": ["64"]}, "prompts.lengths.0: '64' is not of type 'integer'"),
    ("bool for a count", {"protocol.warm_shots": True}, "protocol.warm_shots: True is not of type 'integer'"),
    ("rest not a list", {"protocol.rests_s": "0"}, "protocol.rests_s: '0' is not of type 'array'"),
    ("no engine", {"engines": {}}, "engines: {} should be non-empty"),
    ("no model", {"models": {}}, "models: {} should be non-empty"),
    ("no run id", {"run_id": KeyError}, "<top level>: 'run_id' is a required property"),
    ("run id as a path", {"run_id": "../x"}, "run_id: '../x' is not of the expected form"),
    (
        "missing sha256",
        {"models.smollm2_135m.sha256": KeyError},
        "models.smollm2_135m: give exactly one of 'packages' or 'path' (each with 'sha256'), or "
        "'synthetic': 'sha256' is missing for 'packages'",
    ),
    (
        "shell in a model name",
        {"models": {"x; touch /tmp/pwned": SMOLLM}},
        "models: 'x; touch /tmp/pwned' is not of the expected form",
    ),
    (
        "shell in a CMake flag",
        {"engines.llama_cpp.cmake_extra_flags": ["-DX=1 && rm -rf ~"]},
        "engines.llama_cpp.cmake_extra_flags.0: '-DX=1 && rm -rf ~' is not of the expected form",
    ),
    (
        "shell in an engine option",
        {"spec_modes": {"x": {"type": "ngram-simple", "options": {"spec-n; rm": 1}}}},
        "spec_modes.x.options: 'spec-n; rm' is not of the expected form",
    ),
    (
        "unknown speculative type",
        {"spec_modes": {"x": {"type": "medusa"}}},
        "spec_modes.x.type: 'medusa' is not one of",
    ),
    (
        "draft model not in models",
        {"spec_modes": {"d": {"type": "draft-simple", "draft_model": "ghost"}}},
        "spec_modes.d.draft_model: 'ghost' is not in models",
    ),
    ("unknown prompt order", {"protocol.orders": ["random"]}, "protocol.orders.0: 'random' is not one of"),
    (
        "zero warm fraction",
        {"protocol.warm_fraction": 0},
        "protocol.warm_fraction: 0 is less than or equal to the minimum",
    ),
    (
        "negative ready timeout",
        {"server.ready_timeout_s": -1},
        "server.ready_timeout_s: -1 is less than or equal to",
    ),
    (
        "sampling too fast",
        {"telemetry.interval_s": 0},
        "telemetry.interval_s: 0 is less than the minimum of 0.05",
    ),
    (
        "prompt longer than the context",
        {"prompts.lengths": [600], "protocol.context_tokens": [512]},
        "prompts.lengths: a 600-token prompt plus 16 output tokens does not fit protocol.context_tokens 512",
    ),
]


@pytest.mark.parametrize(("what", "changes", "expected"), BAD, ids=[b[0] for b in BAD])
def test_malformed_config_fails_with_one_line_naming_the_field(what, changes, expected):
    config = copy.deepcopy(SMOKE)
    for path, value in changes.items():
        _set(config, path, copy.deepcopy(value))
    with pytest.raises(WhichshotError) as caught:
        check_config(config)
    message = str(caught.value)
    assert message.startswith("invalid config: " + expected), message
    assert "\n" not in message


DUPLICATE_MODEL = """
run_id: dup
models:
  smollm2_135m: {path: /tmp/a.gguf, sha256: %s}
  smollm2_135m: {path: /tmp/b.gguf, sha256: %s}
""" % ("a" * 64, "b" * 64)  # noqa: UP031 -- braces of YAML flow maps


def test_a_name_given_twice_is_refused_not_silently_replaced(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(DUPLICATE_MODEL)
    with pytest.raises(WhichshotError) as caught:
        check_config_file(path)
    assert str(caught.value) == (
        "invalid config: models.smollm2_135m: given twice (config.yaml line 5); names must be unique"
    )


def _snakemake_with(workdir, config_text: str) -> subprocess.CompletedProcess:
    (workdir / "config").mkdir(parents=True)
    (workdir / "config" / "config.yaml").write_text(config_text)
    argv = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
            "--directory", str(workdir), "--cores", "1"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


@pytest.mark.e2e
def test_the_pipeline_stops_on_a_duplicate_name_before_any_work(tmp_path):
    smoke = (REPO / "tests" / "configs" / "smoke.yaml").read_text()
    other = f"models:\n  smollm2_135m: {{path: /tmp/b.gguf, sha256: {'b' * 64}}}\n"
    result = _snakemake_with(tmp_path, smoke.replace("models:\n", other, 1))
    assert result.returncode != 0
    assert "invalid config: models.smollm2_135m: given twice (config.yaml line" in result.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()
