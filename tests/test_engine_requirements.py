"""What an engine's wheel needs that a machine image lacks (whichshot/wheel_requirements.py), the
hash-checked pins config/gpu-vllm.yaml carries, and what a bundle and the vLLM venv make of such pins:
real pip on wheels made here, with every index off (no network)."""

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from engines import vllm_venv
from whichshot.config import check_config
from whichshot.errors import WhichshotError
from whichshot.offline import build
from whichshot.wheel_requirements import (
    image_packages,
    lacking,
    pins,
    pip_lines,
    report_resolution,
    target_environment,
)

ROOT = Path(__file__).resolve().parents[1]
PY312 = target_environment("3.12")
# The vllm schema's defaults the venv install reads.
ENGINE_DEFAULTS = {"without": [], "system_site_packages": False, "requirements": []}


def resolution(**requires: list[str]) -> dict:
    return {name: {"requires_dist": lines} for name, lines in requires.items()}


def test_what_the_image_lacks_follows_markers_extras_and_the_lacking_ones_own_requirements():
    resolved = resolution(
        vllm=[
            "numpy",  # the image has it: nothing below it is followed
            "fastapi[standard]<0.137,>=0.133",
            "llguidance<1.8; platform_machine == 'x86_64' or platform_machine == 'aarch64'",
            "mlx; sys_platform == 'darwin'",
            "tomli; python_version < '3.11'",
            "pytest; extra == 'test'",
            "Flash_Infer.Python==0.6",  # a name as written in the metadata, normalised
        ],
        numpy=["never-read"],
        fastapi=[
            "starlette>=0.46",
            "pydantic",
            "uvicorn[standard]; extra == 'standard'",
            "email-validator; extra == 'all'",
        ],
        starlette=["anyio"],
        pydantic=["pydantic-core==2.50"],
        **{"pydantic-core": [], "llguidance": [], "flash-infer-python": ["cuda-tile"], "cuda-tile": []},
        uvicorn=["h11", "httptools; extra == 'standard'"],
        httptools=[],
    )
    have = {"numpy", "anyio", "h11"}
    found = lacking(["vllm"], resolved, have, PY312)
    assert found == [
        "fastapi", "llguidance", "flash-infer-python", "starlette", "pydantic", "uvicorn", "cuda-tile",
        "pydantic-core", "httptools",
    ]  # fmt: skip
    # A name to skip is left out with what only it needed; what another lacking one needs stays.
    assert "cuda-tile" not in lacking(["vllm"], resolved, have, PY312, frozenset({"flash-infer-python"}))
    on_arm = lacking(["vllm"], resolved, have, {**PY312, "platform_machine": "ppc64le"})
    assert "llguidance" not in on_arm and "fastapi" in on_arm


def test_a_lacking_name_the_resolution_does_not_hold_is_an_error():
    with pytest.raises(WhichshotError, match="starlette is needed and not in the resolution"):
        lacking(["vllm"], resolution(vllm=["fastapi"], fastapi=["starlette"]), set(), PY312)


def test_pins_come_from_pips_report_with_the_wheels_sha256():
    report = {"install": [{
        "metadata": {"name": "Lark", "version": "1.2.2", "requires_dist": []},
        "download_info": {"url": "https://files/lark-1.2.2-py3-none-any.whl",
                          "archive_info": {"hashes": {"sha256": "ab" * 32}}},
    }]}  # fmt: skip
    resolved = report_resolution(report)
    assert resolved["lark"]["file"] == "lark-1.2.2-py3-none-any.whl"
    assert pins(["lark"], resolved) == [{"pin": "lark==1.2.2", "sha256": "ab" * 32}]
    resolved["lark"]["sha256"] = None
    with pytest.raises(WhichshotError, match="no sha256 for lark"):
        pins(["lark"], resolved)


def test_the_gpu_configs_vllm_pins_are_hashed_and_none_is_in_the_image():
    config = check_config(yaml.safe_load((ROOT / "config/gpu-vllm.yaml").read_text()))
    spec = config["engines"]["vllm_cuda"]
    have = image_packages(ROOT / "tools/device_image_packages.txt")
    names = [item["pin"].split("==")[0] for item in spec["requirements"]]
    assert "torch" in have and "transformers" in have and "gguf" not in have
    assert len(names) == len(set(names)) and not set(names) & have and "gguf" in names
    assert spec["no_deps"] and spec["site_python"].startswith("/") and len(spec["sha256"]) == 64
    lines = pip_lines(spec)
    assert lines[0] == f"vllm==0.26.0 --hash=sha256:{spec['sha256']}"
    assert all(" --hash=sha256:" in line for line in lines) and len(lines) == len(names) + 1


@pytest.mark.parametrize(
    "change, message",
    [
        ({"requirements": ["gguf==0.19.0"]}, "every pin or none"),
        ({"sha256": None}, "every pin or none"),
        ({"no_deps": False}, "set no_deps"),
        ({"system_site_packages": True}, "leave system_site_packages off"),
    ],
)
def test_a_vllm_entry_that_pip_could_not_install_as_pinned_is_refused(change, message):
    config = yaml.safe_load((ROOT / "config/gpu-vllm.yaml").read_text())
    spec = config["engines"]["vllm_cuda"]
    spec.update(change)
    if spec["sha256"] is None:
        del spec["sha256"]
    with pytest.raises(WhichshotError, match=message):
        check_config(config)


def make_wheel(folder: Path, name: str, version: str) -> tuple[Path, str]:
    """A pure-Python wheel of one module `name` holding VERSION; (path, sha256)."""
    dist = f"{name}-{version}"
    path = folder / f"{dist}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{name}/__init__.py", f"VERSION = {version!r}\n")
        wheel.writestr(
            f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
        wheel.writestr(
            f"{dist}.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        wheel.writestr(f"{dist}.dist-info/RECORD", "")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def no_index(tmp_path, monkeypatch):
    """pip without an index, its configuration off, this test's cache."""
    for name in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("WHICHSHOT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "offline" / "built-wheels"  # where download_wheels also looks


def hashed_spec(wheels: Path) -> dict:
    _, top = make_wheel(wheels, "wsengine", "1.0")
    _, dep = make_wheel(wheels, "wsdep", "2.0")
    make_wheel(wheels, "wsunpinned", "3.0")
    return {"kind": "vllm", "distribution": "wsengine", "version": "1.0", "sha256": top, "no_deps": True,
            "requirements": [{"pin": "wsdep==2.0", "sha256": dep}]}  # fmt: skip


def test_a_bundle_carries_exactly_the_hashed_pins_and_refuses_a_wheel_that_does_not_match(tmp_path, no_index):
    spec = hashed_spec(no_index)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    platforms = [build.this_machine_platform()]
    carried = build.bundle_engine_wheels([spec], version, platforms, tmp_path / "engine-wheels")
    assert carried["requirements"] == ["wsengine==1.0", "wsdep==2.0"]
    assert carried["files"] == ["wsdep-2.0-py3-none-any.whl", "wsengine-1.0-py3-none-any.whl"]
    spec["requirements"][0]["sha256"] = "0" * 64
    with pytest.raises(WhichshotError, match="could not download"):
        build.bundle_engine_wheels([spec], version, platforms, tmp_path / "other")


def test_the_venv_layers_on_site_python_and_installs_the_pins_hash_checked(tmp_path, no_index, monkeypatch):
    # The image: an interpreter that is itself a venv, with a package of its own (the image's torch).
    image = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "venv", str(image)], check=True)
    wheel, _ = make_wheel(tmp_path / "image-wheels", "wsimage", "5.0")
    pip = [str(image / "bin/python"), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel)]
    subprocess.run(pip, check=True)
    spec = {**ENGINE_DEFAULTS, **hashed_spec(no_index), "site_python": str(image / "bin/python")}
    monkeypatch.setenv("PIP_FIND_LINKS", str(no_index))
    home = tmp_path / "engine"
    built = vllm_venv.install(home, spec, vllm_venv.install_spec(spec))
    python = vllm_venv.venv_python(home)
    seen = subprocess.run([str(python), "-c", "import wsengine, wsdep, wsimage; print(wsimage.VERSION)"],
                          capture_output=True, text=True)  # fmt: skip
    assert seen.stdout.strip() == "5.0", seen.stderr
    locked = {d["name"]: d for d in built["lock"]}
    assert locked["wsengine"]["sha256"] == spec["sha256"] and "wsunpinned" not in locked
    assert locked["wsimage"]["sha256"] is None and locked["wsimage"]["version"] == "5.0"
    assert built["identity"]["site_python"] == spec["site_python"]
    assert vllm_venv.cached_build(home) == json.loads((home / "build.json").read_text())
    # A wheel that does not match its pin stops the install in one line.
    spec["requirements"][0]["sha256"] = "0" * 64
    with pytest.raises(WhichshotError, match="exited with 1"):
        vllm_venv.install(tmp_path / "other", spec, vllm_venv.install_spec(spec))


def test_the_build_id_names_vllm_torch_transformers_and_triton():
    lock = [{"name": n, "version": v} for n, v in
            [("torch", "2.11.0"), ("vllm", "0.26.0"), ("lark", "1.2.2"), ("triton", "3.6.0")]]  # fmt: skip
    assert vllm_venv.key_versions(lock) == {"torch": "2.11.0", "vllm": "0.26.0", "triton": "3.6.0"}


def test_a_sites_own_vllm_interpreter_is_served_as_it_is_and_its_versions_are_the_build_id(tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "venv", str(site)], check=True)
    wheel, _ = make_wheel(tmp_path / "wheels", "vllm", "0.26.0")
    pip = [str(site / "bin/python"), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel)]
    subprocess.run(pip, check=True)
    spec = {**ENGINE_DEFAULTS, "distribution": "vllm", "version": "0.26.0", "no_deps": False,
            "python": str(site / "bin/python")}  # fmt: skip
    built = vllm_venv.existing(tmp_path / "home", spec, vllm_venv.install_spec(spec))
    assert built["python"] == spec["python"] and built["identity"]["versions"] == {"vllm": "0.26.0"}
    assert {"name": "vllm", "version": "0.26.0", "sha256": None, "source": "the site's own interpreter"} in (
        built["lock"]
    )
    again = vllm_venv.existing(tmp_path / "home", spec, vllm_venv.install_spec(spec))
    assert again["build_id"] == built["build_id"]
    newer, _ = make_wheel(tmp_path / "wheels", "vllm", "0.27.0")
    subprocess.run([*pip[:-1], str(newer)], check=True)
    with pytest.raises(WhichshotError, match="has vllm 0.27.0, the entry pins 0.26.0"):
        vllm_venv.existing(tmp_path / "home", spec, vllm_venv.install_spec(spec))


def test_a_given_python_installs_nothing():
    config = yaml.safe_load((ROOT / "config/gpu-vllm.yaml").read_text())
    config["engines"]["vllm_cuda"]["python"] = "/opt/site/bin/python3"
    with pytest.raises(WhichshotError, match="a given python is served as it is"):
        check_config(config)
    spec = config["engines"]["vllm_cuda"]
    for key in ("sha256", "site_python", "requirements", "no_deps"):
        del spec[key]
    assert check_config(config)["engines"]["vllm_cuda"]["python"] == "/opt/site/bin/python3"
