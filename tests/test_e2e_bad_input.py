"""Bad input against the real pipeline: one clear line, nothing lost, no engine left running."""

import socket

import pytest

from tests.pipeline import engine_processes, load_config, run_pipeline

pytestmark = pytest.mark.e2e


def _error_lines(result) -> list[str]:
    return [line for line in (result.stdout + result.stderr).splitlines() if "whichshot: error:" in line]


def test_checksum_mismatch_is_refused(tmp_path):
    fake = tmp_path / "not-a-model.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 64)
    config = load_config("smoke")
    config["models"] = {"fake": {"path": str(fake), "sha256": "0" * 64}}
    result = run_pipeline(tmp_path / "w", config)
    assert result.returncode != 0
    lines = _error_lines(result)
    assert lines and "sha256 of" in lines[0] and "refusing to use it" in lines[0]


def test_missing_local_model_is_named(tmp_path):
    config = load_config("smoke")
    config["models"] = {"gone": {"path": str(tmp_path / "nope.gguf"), "sha256": "0" * 64}}
    result = run_pipeline(tmp_path / "w", config)
    assert result.returncode != 0
    assert any("does not exist" in line for line in _error_lines(result))


def test_schema_violation_stops_before_any_work(tmp_path):
    config = load_config("smoke")
    config["protocol"]["rests_s"] = [-3]
    result = run_pipeline(tmp_path / "w", config)
    assert result.returncode != 0
    assert "protocol.rests_s.0: -3 is less than the minimum of 0" in result.stderr
    assert not (tmp_path / "w" / "results").exists()


def test_port_in_use_is_reported(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        config = load_config("smoke")
        config["server"]["port"] = holder.getsockname()[1]
        result = run_pipeline(tmp_path / "w", config)
    assert result.returncode != 0
    assert any("already in use" in line for line in _error_lines(result))


def test_engine_never_ready_times_out_with_its_log(tmp_path):
    before = {p.pid for p in engine_processes(tmp_path)}
    config = load_config("smoke")
    config["server"]["ready_timeout_s"] = 0.05
    result = run_pipeline(tmp_path / "w", config)
    assert result.returncode != 0
    assert any("engine not ready after" in line for line in _error_lines(result))
    assert [p for p in engine_processes(tmp_path) if p.pid not in before] == []
