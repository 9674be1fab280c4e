"""Each running server says what warm-up its process showed it ran (warmup_observed), not what the
config asked for: the echo engine from its own log line, llama-server from its start-up log."""

import dataclasses

import pytest

from tests import echo_engine
from tests.fault_kit import real_engine, server_settings
from whichshot.engine.base import NO_WARMUP, ONE_DECODE, ServerSettings

WARMUP_LINE = "warming up the model with an empty run"


@pytest.mark.parametrize(("warmup", "observed"), [("on", ONE_DECODE), ("off", NO_WARMUP)])
def test_the_echo_server_says_what_its_process_printed(tmp_path, warmup, observed):
    settings = ServerSettings(threads=1, context_tokens=512, ready_timeout_s=30, warmup=warmup)
    server = echo_engine.ENGINE.start({}, tmp_path / "no-model", settings, tmp_path / "engine.log")
    try:
        assert server.warmup_observed == observed
    finally:
        server.stop()


@pytest.mark.e2e
@pytest.mark.parametrize(("warmup", "observed"), [("off", NO_WARMUP), ("on", ONE_DECODE)])
def test_with_warm_up_off_the_engine_log_has_no_warm_up(tmp_path, warmup, observed):
    real = real_engine()
    settings = dataclasses.replace(server_settings(), warmup=warmup)
    log = tmp_path / "engine.log"
    server = real.engine.start(real.build, real.model_path, settings, log)
    try:
        assert server.warmup_observed == observed
    finally:
        server.stop()
    assert (WARMUP_LINE in log.read_text()) == (warmup == "on")
