import os

import pytest

from tests.pipeline import engine_processes, filled_config, load_config, run_pipeline
from whichshot.cache import cache_root
from whichshot.engine import load_engine

# Fixtures that build or start a real engine: a test that takes one is end-to-end whether or not its
# file says so, and the fast loop (`pytest -m "not e2e"`, docs/layout.md) leaves it out.
ENGINE_FIXTURES = frozenset({
    "llama_server_binary", "model_path", "smoke_run",  # tests/test_engine_openai.py, this file
    "probed",  # tests/test_verify_probe.py: the verify probe on the real llama-server
    "series_and_peer",  # tests/test_peer_client.py: a real series and the peer's client
})  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the marker must be there to be read
def pytest_collection_modifyitems(config, items):
    for item in items:
        if ENGINE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session", autouse=True)
def engine_built(request):
    """Build (or find cached) the CPU llama.cpp every e2e test uses, once, with every core.

    The pipeline runs with --cores 1, so a build started by the first e2e test would use one
    core; the build id does not depend on the job count, so later runs reuse this one.
    """
    if not any(item.get_closest_marker("e2e") for item in request.session.items):
        return
    spec = filled_config("smoke")["engines"]["llama_cpp"]
    load_engine(spec["kind"]).build(spec, cache_root(None), os.cpu_count() or 1)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One real end-to-end run of the smoke grid (builds llama.cpp once; cached across runs)."""
    workdir = tmp_path_factory.mktemp("smoke")
    before = {p.pid for p in engine_processes(workdir)}
    result = run_pipeline(workdir, load_config("smoke"))
    assert result.returncode == 0, result.stderr[-4000:]
    leftover = [p for p in engine_processes(workdir) if p.pid not in before]
    return {"workdir": workdir, "result": result, "leftover_engines": leftover}
