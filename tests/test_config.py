import copy
from pathlib import Path

import pytest
import yaml

from whichshot.config import check_config
from whichshot.errors import WhichshotError

DEFAULT = yaml.safe_load((Path(__file__).parent.parent / "config" / "config.yaml").read_text())


def test_default_config_is_valid():
    check_config(copy.deepcopy(DEFAULT))


def _broken(path: str, value):
    config = copy.deepcopy(DEFAULT)
    *parents, last = path.split(".")
    node = config
    for key in parents:
        node = node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return config


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("protocol.rests_s", [-1], "protocol.rests_s.0: -1 is less than the minimum of 0"),
        ("protocol.warm_shots", "six", "protocol.warm_shots: 'six' is not of type 'integer'"),
        ("engines.llama_cpp.kind", "sglang", "engines.llama_cpp.kind: 'sglang' is not one of"),
        ("models.smollm2_135m.sha256", KeyError, "smollm2_135m: give exactly one of 'packages' or 'path'"),
        (
            "models.smollm2_135m.sha256",
            "abc",
            "models.smollm2_135m.sha256: 'abc' is not of the expected form",
        ),
        ("prompts.lengths", [], "prompts.lengths: [] should be non-empty"),
        ("prompts.lengths", [128, 128], "prompts.lengths: [128, 128] has non-unique elements"),
        ("server.port", 70000, "server.port: 70000 is greater than the maximum of 65535"),
        ("telemetry.backends", ["dcgm"], "telemetry.backends.0: 'dcgm' is not one of"),
        ("protocol.surprise", 1, "protocol: unknown key"),
    ],
)
def test_bad_config_gives_one_line_naming_the_field(path, value, expected):
    with pytest.raises(WhichshotError) as caught:
        check_config(_broken(path, value))
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message


def test_empty_grid_is_refused():
    config = _broken("protocol.cold_processes", 0)
    config["protocol"]["warm_shots"] = 0
    with pytest.raises(WhichshotError, match="grid is empty"):
        check_config(config)


def test_workloads_that_would_run_no_series_are_refused():
    config = copy.deepcopy(DEFAULT)
    names = config["workloads"]["names"]
    assert names and config["protocol"]["warm_shots"]
    config["workloads"].update(cold_processes=0, warm_shots=0)
    with pytest.raises(WhichshotError) as refused:
        check_config(config)
    assert str(refused.value) == (
        "invalid config: workloads: cold_processes and warm_shots are both 0 (where unset, the protocol's), "
        f"so workloads {', '.join(names)} would run no series"
    )
    config["workloads"]["warm_shots"] = 2  # warm series only: they run
    check_config(config)


def test_model_needs_exactly_one_source():
    config = copy.deepcopy(DEFAULT)
    config["models"]["smollm2_135m"]["path"] = "/tmp/x.gguf"
    with pytest.raises(WhichshotError, match="exactly one of 'packages' or 'path'"):
        check_config(config)


def test_the_schema_fills_every_default_once_also_inside_named_maps():
    from whichshot.config import with_defaults

    raw = {
        "run_id": "x",
        "engines": {"e": {"kind": "openai", "argv": ["srv", "--host", "{host}"]}},
        "models": {"m": {"path": "/m.gguf", "sha256": "0" * 64}},
        "prompts": {"lengths": [64]},
        "protocol": {},
    }
    filled = with_defaults(raw)
    assert raw["protocol"] == {}  # the caller's config is not changed
    assert filled["protocol"]["warm_fraction"] == 0.7 and filled["protocol"]["rests_s"] == [0]
    assert filled["engines"]["e"]["ready_path"] == "/health"  # a per-kind default, in a named map
    assert filled["engines"]["e"]["metrics_path"] == "/metrics" and "model_name" not in filled["engines"]["e"]
    assert filled["models"]["m"]["measure"] is True
    assert filled["workloads"]["names"] == [] and filled["spec_modes"] == {"none": {}}


def test_shot_columns_marked_as_axes_are_the_grids_axes():
    from whichshot.shots.axes import AXES
    from whichshot.tables import record_schema

    marked = [n for n, p in record_schema("shots")["properties"].items() if p.get("x-axis")]
    assert set(marked) == set(AXES)
