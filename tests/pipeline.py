"""Run the real pipeline in a scratch working directory (the .test/ convention)."""

import copy
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import yaml

from whichshot.config import with_defaults

REPO = Path(__file__).resolve().parent.parent
CONFIGS = Path(__file__).resolve().parent / "configs"


def load_config(name: str) -> dict[str, Any]:
    return yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())


def filled_config(name: str) -> dict[str, Any]:
    """A test config with the schema's defaults filled in, as the pipeline hands it to the library."""
    return with_defaults(load_config(name))


def run_pipeline(
    workdir: Path,
    config: dict[str, Any],
    *extra: str,
    timeout_s: float = 3600,
    profile: Path | None = None,
    env: dict[str, str] | None = None,
    cores: int = 1,
) -> subprocess.CompletedProcess:
    """snakemake in `workdir`, whose config/config.yaml is `config`: `cores` cores with the default
    workflow profile found where a user's run finds it (profiles/default beside the Snakefile), or
    `profile` (which then sets the executor and its limits) in `env`."""
    (workdir / "config").mkdir(parents=True, exist_ok=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(copy.deepcopy(config)))
    limits = ["--cores", str(cores)] if profile is None else []
    chosen = [] if profile is None else ["--workflow-profile", str(profile)]
    argv = [
        sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
        "--directory", str(workdir), *limits, *chosen, *extra,
    ]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)


def engine_processes(workdir: Path | None = None) -> list[psutil.Process]:
    """Every llama-server process on this machine; with `workdir`, only those whose log files lie
    under it (the pipeline redirects a server's output there), so that another session's servers on a
    shared machine are never taken for this run's orphans."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["name"] == "llama-server" or (cmdline and cmdline[0].endswith("llama-server")):
            found.append(proc)
    return found if workdir is None else [proc for proc in found if _writes_under(proc, workdir)]


def _writes_under(proc: psutil.Process, workdir: Path) -> bool:
    try:
        return any(Path(f.path).is_relative_to(workdir) for f in proc.open_files())
    except psutil.Error:  # gone since it was listed, or not ours to inspect
        return False


def sigint_as_in_a_terminal() -> None:
    """preexec_fn: SIGINT back to its default, as under an interactive shell (a test runner
    started in the background inherits it ignored, and then Ctrl-C could not be simulated)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
