"""Security: argument lists only (no shell, no command strings), no shell in the rules, hostile
config values stay single arguments, archived environments carry no secrets.
(The engine's loopback-only socket is checked on the real engine in test_faults_engine.py.)"""

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from engines.llama_cpp import cmake_flags, server_argv, speculative_args
from tests.pipeline import REPO
from whichshot.engine.base import ServerSettings
from whichshot.engine.process import LOOPBACK
from whichshot.errors import WhichshotError
from whichshot.redact import redact_environment

PYTHON_SOURCES = sorted(
    p
    for folder in ("whichshot", "engines", "workflow/scripts", "tools")
    for p in (REPO / folder).rglob("*.py")
)
SUBPROCESS_CALLS = {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"}
SHELL_FUNCTIONS = {
    ("os", "system"),
    ("os", "popen"),
    ("subprocess", "getoutput"),
    ("subprocess", "getstatusoutput"),
}


def _calls(tree: ast.AST):
    """(module, function, call node) of every module.function(...) call."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name):
                yield owner.id, node.func.attr, node


def _builds_a_string(node: ast.AST) -> bool:
    """A command given as text: a literal, an f-string, '+'/'%' on strings, or str.format/join."""
    if isinstance(node, ast.Constant | ast.JoinedStr):
        return isinstance(node, ast.JoinedStr) or isinstance(node.value, str)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return _builds_a_string(node.left) or _builds_a_string(node.right)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"format", "join"}
    )


def _hidden_imports(tree: ast.AST) -> list[int]:
    """Lines that import subprocess or os functions under other names (the scan would miss calls)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if (isinstance(node, ast.ImportFrom) and node.module in {"subprocess", "os"}
            and any(a.name in SUBPROCESS_CALLS | {"system", "popen"} for a in node.names))
        or (isinstance(node, ast.Import) and any(a.name == "subprocess" and a.asname for a in node.names))
    ]  # fmt: skip


def _command_problems(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    problems = [
        f"{path.name}:{line}: subprocess/os imported under another name" for line in _hidden_imports(tree)
    ]
    for module, function, call in _calls(tree):
        where = f"{path.name}:{call.lineno}"
        if (module, function) in SHELL_FUNCTIONS:
            problems.append(f"{where}: {module}.{function} runs a shell")
        if module != "subprocess" or function not in SUBPROCESS_CALLS:
            continue
        for keyword in call.keywords:
            if keyword.arg == "shell" and not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            ):
                problems.append(f"{where}: shell= is set")
        command = (
            call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "args"), None)
        )
        if command is not None and _builds_a_string(command):
            problems.append(f"{where}: the command is a string")
    return problems


def test_every_subprocess_gets_an_argument_list_and_no_shell():
    assert PYTHON_SOURCES, "nothing scanned"
    found = sum(
        1
        for path in PYTHON_SOURCES
        for module, function, _ in _calls(ast.parse(path.read_text()))
        if module == "subprocess" and function in SUBPROCESS_CALLS
    )
    assert found >= 5, "the scan no longer sees the package's subprocess calls"
    assert [p for path in PYTHON_SOURCES for p in _command_problems(path)] == []


def test_the_scan_catches_command_strings(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os, subprocess\n"
        "from subprocess import run\n"
        "subprocess.run('ls ' + name)\n"
        "subprocess.Popen(f'llama-server -m {model}')\n"
        "subprocess.run(argv, shell=True)\n"
        "subprocess.check_output(args=' '.join(argv))\n"
        "os.system(command)\n"
    )
    assert len(_command_problems(bad)) == 6


def test_rules_run_package_scripts_never_shell_commands():
    rule_files = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
    text = {path.name: path.read_text() for path in rule_files}
    for name, source in text.items():
        assert not re.search(r"^\s*(shell|run):", source, re.MULTILINE), f"{name} has a shell:/run: rule"
        assert "subprocess" not in source and "os.system" not in source, name
    rules = sum(len(re.findall(r"^(?:rule|checkpoint) \w+:", s, re.MULTILINE)) for s in text.values())
    scripts = sum(len(re.findall(r"^\s+script:", s, re.MULTILINE)) for s in text.values())
    targets = sum(len(re.findall(r"^rule (all|claims_check):", s, re.MULTILINE)) for s in text.values())
    assert targets == 2 and rules == scripts + targets  # every rule but the two targets runs a script


HOSTILE = "x; touch /tmp/pwned && $(rm -rf ~) `id` | cat"


def test_hostile_values_stay_single_arguments():
    settings = ServerSettings(threads=2, context_tokens=512, extra_args=("--spec-type", HOSTILE))
    argv = server_argv("/bin/llama-server", Path(HOSTILE), settings, 8080)
    assert all(isinstance(arg, str) for arg in argv)
    assert argv[argv.index("--model") + 1] == HOSTILE and argv[-1] == HOSTILE
    assert argv[argv.index("--host") + 1] == LOOPBACK and argv.count("--host") == 1
    mode = {"type": "ngram-simple", "options": {"spec-ngram-simple-size-n": HOSTILE}}
    assert speculative_args(mode)[-1] == HOSTILE
    spec = {"backend": "cpu", "source": {"build_number": 1, "vendored_commit": "abc1234"}}
    assert cmake_flags({**spec, "cmake_extra_flags": [HOSTILE]})[-1] == HOSTILE


ENVIRONMENT = {
    "PATH": "/usr/bin",
    "HOME": "/root",
    "CUDA_VISIBLE_DEVICES": "0",
    "OMP_NUM_THREADS": "2",
    "SLURM_JOB_ID": "42",
    "HF_TOKEN": "hf_abc",
    "GITHUB_TOKEN": "ghp_abc",
    "AWS_SECRET_ACCESS_KEY": "abc",
    "AWS_ACCESS_KEY_ID": "AKIA",
    "OPENAI_API_KEY": "sk-abc",
    "PGPASSWORD": "pw",
    "MYSQL_PWD": "pw",
    "DB_PASSWD": "pw",
    "GPG_PASSPHRASE": "pw",
    "GOOGLE_APPLICATION_CREDENTIALS": "/k.json",
    "SESSION_COOKIE": "c",
    "HTTP_AUTHORIZATION": "Bearer x",
    "SSH_PRIVATE_KEY": "-----BEGIN",
    "client_secret": "s",
    "HTTPS_PROXY": "http://user:hunter2@proxy:3128",
    "NO_PROXY": "localhost",
}


def test_archived_environment_drops_secrets_and_keeps_the_rest():
    kept = redact_environment(ENVIRONMENT)
    assert kept == {k: ENVIRONMENT[k] for k in ("PATH", "HOME", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",
                                                "SLURM_JOB_ID", "NO_PROXY")}  # fmt: skip
    assert "hunter2" not in repr(kept)


@pytest.mark.parametrize("name", ["PWD", "OLDPWD", "LANG", "TERM", "PYTHONPATH", "LD_LIBRARY_PATH"])
def test_ordinary_variables_are_kept(name):
    assert redact_environment({name: "value"}) == {name: "value"}


SECRET_SPEC = {
    "kind": "openai",
    "argv": [sys.executable, "--api-key", "sk-argv-secret", "--hf-token=hf_inline_secret", "--host", "{host}",
             "--proxy", "http://user:p4ss@proxy:3128"],
    "env": {"HF_TOKEN": "hf_env_secret", "OMP_NUM_THREADS": "2"},
    "request_extra": {"api_key": "sk-request-secret", "return_token_ids": True},
}  # fmt: skip
SECRETS = ("sk-argv-secret", "hf_inline_secret", "p4ss", "hf_env_secret", "sk-request-secret")


def test_engine_secrets_never_reach_build_json_or_the_archived_config():
    from whichshot.config import with_defaults
    from whichshot.engine import load_engine
    from whichshot.redact import redact_config

    spec = with_defaults({"engines": {"srv": SECRET_SPEC}})["engines"]["srv"]
    build = json.dumps(load_engine("openai").build(spec, Path("/tmp"), 1))
    archived = json.dumps(redact_config({"engines": {"srv": spec}, "run_id": "x"}))
    for secret in SECRETS:
        assert secret not in build and secret not in archived, secret
    kept = json.loads(archived)["engines"]["srv"]
    assert kept["env"]["OMP_NUM_THREADS"] == "2" and kept["request_extra"]["return_token_ids"] is True
    assert kept["argv"][1:4] == ["--api-key", "<redacted>", "--hf-token=<redacted>"]
    assert kept["argv"][7] == "http://<redacted>@proxy:3128"


def test_an_api_key_is_read_from_the_variable_the_config_names_and_only_its_name_is_kept(monkeypatch):
    from engines.openai_compat import auth_headers
    from whichshot.config import with_defaults
    from whichshot.engine import load_engine

    spec = {"kind": "openai", "base_url": "http://127.0.0.1:8080", "api_key_env": "SERVER_KEY"}
    spec = with_defaults({"engines": {"srv": spec}})["engines"]["srv"]
    monkeypatch.setenv("SERVER_KEY", "sk-secret-value")
    build = load_engine("openai").build(spec, Path("/tmp"), 1)
    assert build["server"]["api_key_env"] == "SERVER_KEY" and "sk-secret-value" not in json.dumps(build)
    assert auth_headers(build["server"]) == {"Authorization": "Bearer sk-secret-value"}
    no_key = {k: v for k, v in spec.items() if k != "api_key_env"}
    assert "api_key_env" not in load_engine("openai").build(no_key, Path("/tmp"), 1)["server"]
    assert auth_headers(no_key) == {}
    monkeypatch.delenv("SERVER_KEY")
    with pytest.raises(WhichshotError, match="^api_key_env names the environment variable SERVER_KEY"):
        auth_headers(build["server"])
