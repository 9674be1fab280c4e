import pytest

from tests.pipeline import engine_processes, load_config, run_pipeline


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One real end-to-end run of the smoke grid (builds llama.cpp once; cached across runs)."""
    workdir = tmp_path_factory.mktemp("smoke")
    before = {p.pid for p in engine_processes()}
    result = run_pipeline(workdir, load_config("smoke"))
    assert result.returncode == 0, result.stderr[-4000:]
    leftover = [p for p in engine_processes() if p.pid not in before]
    return {"workdir": workdir, "result": result, "leftover_engines": leftover}
