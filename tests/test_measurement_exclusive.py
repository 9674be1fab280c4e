"""Measurements never overlap on a machine (issue 19's H200 runs did, under --cores 16 without the
workflow profile): every measurement holds the machine's lock, and a run whose series overlapped
anyway (an older run, two runs by hand) says so on every figure of those series."""

import json
import subprocess
import sys
import textwrap

import pandas as pd

from tests.shot_tables import cell, series
from whichshot.figures.table import compute_figures

HOLDER = textwrap.dedent("""
    import json, sys, time
    from whichshot.engine.machine_lock import measurement_lock
    with measurement_lock():
        start = time.monotonic()
        time.sleep(0.4)
        print(json.dumps([start, time.monotonic()]))
""")


def test_two_measurements_on_one_machine_take_turns():
    holders = [subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
               for _ in range(3)]  # fmt: skip
    spans = sorted(json.loads(holder.communicate(timeout=30)[0]) for holder in holders)
    assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))


def _timed(of: dict, start_s: float, n: int = 3) -> list[dict]:
    rows = series(of, [{}] * n, hostname="node-a")
    for position, row in enumerate(rows):
        row["t_request_mono_s"] = start_s + position
        row["t_end_mono_s"] = start_s + position + 0.9
    return rows


def _caveats(rows: list[dict]) -> dict:
    _figures, caveats = compute_figures(pd.DataFrame(rows), [], 0.7)
    return {c["caveat_id"]: c for c in caveats}


def test_series_that_ran_at_once_are_caveated_and_series_in_turn_are_not():
    first, second = cell(prefill_chunk_tokens=512), cell(prefill_chunk_tokens=1024)
    assert "series_overlapped" not in _caveats(_timed(first, 0.0) + _timed(second, 10.0))
    overlapped = _caveats(_timed(first, 0.0) + _timed(second, 1.5))["series_overlapped"]
    assert "2 series ran at the same time" in overlapped["sentence"]
    assert len(overlapped["shot_ids"]) == 6 and overlapped["figure_ids"]


def test_a_build_compiles_holding_the_measurement_lock(monkeypatch, tmp_path):
    """While llama.cpp compiles (every core), a measurement asking for the lock would wait."""
    from engines import llama_cpp
    from tests.pipeline import filled_config

    def compile_and_probe(*_args) -> dict:
        probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=30)
        return {"lock_free_during_build": probe.stdout.strip()}

    monkeypatch.setattr(llama_cpp, "_build_into", compile_and_probe)
    spec = filled_config("smoke")["engines"]["llama_cpp"]
    assert llama_cpp.ENGINE.build(spec, tmp_path, 2) == {"lock_free_during_build": "False"}
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=30)
    assert probe.stdout.strip() == "True"  # and free again afterwards


PROBE = textwrap.dedent("""
    import fcntl
    from whichshot.engine.machine_lock import lock_path
    with open(lock_path(), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(False)
        else:
            print(True)
""")


def test_nodes_sharing_a_temporary_directory_keep_separate_locks(monkeypatch):
    from whichshot.engine import machine_lock

    paths = {}
    for host in ("wsn1.cluster", "wsn2.cluster"):
        monkeypatch.setattr(machine_lock.socket, "gethostname", lambda host=host: host)
        paths[host] = machine_lock.lock_path()
    assert paths["wsn1.cluster"] != paths["wsn2.cluster"]
    assert paths["wsn1.cluster"].parent == paths["wsn2.cluster"].parent


def test_a_series_resumed_after_another_ran_is_not_caveated_as_overlapping():
    """Overlap is judged per engine process: a series interrupted after shot 1 and resumed in a
    new process once another series had run spans that series, but never ran beside it."""
    resumed, between = cell(prefill_chunk_tokens=512), cell(prefill_chunk_tokens=1024)
    rows = series(resumed, [{}] * 3, processes=[1, 2, 2], hostname="node-a")
    for row, start_s in zip(rows, (0.0, 20.0, 21.0), strict=True):
        row.update(t_request_mono_s=start_s, t_end_mono_s=start_s + 0.9)
    assert "series_overlapped" not in _caveats(rows + _timed(between, 10.0))
    assert "series_overlapped" in _caveats(rows + _timed(between, 20.5))
