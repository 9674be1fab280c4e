"""Write an offline bundle on a connected machine: the project, its wheels for a target interpreter
and platform, the engine sources and the pinned model files the configs name, a sha256 manifest,
and the stdlib-only installer (whichshot/offline/installer.py) as install.py."""

import io
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from whichshot import pypi
from whichshot.archive.bundle import MANIFEST, write_manifest
from whichshot.atomic import write_json_atomic, write_text_atomic
from whichshot.cache import cache_root
from whichshot.errors import WhichshotError
from whichshot.offline import installer
from whichshot.prepare.models import fetch_model
from whichshot.redact import secret_places
from whichshot.wheel_requirements import pip_lines, requirement_names

REPO = Path(__file__).resolve().parents[2]
# pip's "--platform manylinux2014_x86_64" means glibc 2.17; its legacy names and their glibc versions.
LEGACY_MANYLINUX = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}
# pip download tries once more after building each distribution that has no wheel for the target.
MAX_SDIST_BUILDS = 10


def build_bundle(
    configs: list[Path],
    out: Path,
    python_version: str,
    platforms: list[str],
    extras: list[str],
    with_models: bool = True,
    source_root: Path = REPO,
) -> dict[str, Any]:
    """Write the bundle to `out` (a folder, or a .tar file); return its summary (files, bytes)."""
    loaded = {_stem(path): (path, yaml.safe_load(path.read_text(encoding="utf-8"))) for path in configs}
    if len(loaded) != len(configs):
        raise WhichshotError("two --config files share a file name; the bundle keeps them side by side")
    for path, config in loaded.values():
        warn_of_secrets(path, config)
    tar = out.suffix == ".tar"
    name = out.stem if tar else out.name
    if out.exists():
        raise WhichshotError(f"{out} exists; the bundle is written to a new path")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{name}.partial-") as scratch:
        root = Path(scratch) / name
        described = _fill(root, loaded, python_version, platforms, extras, with_models, source_root)
        write_json_atomic(root / installer.DESCRIPTION, described)
        write_text_atomic(root / "README.txt", _readme(name, described))
        shutil.copyfile(installer.__file__, root / "install.py")
        write_manifest(root)
        summary = bundle_summary(root)
        if tar:
            _tar(root, out)
        else:
            root.rename(out)
    return summary


def warn_of_secrets(path: Path, config: Any) -> None:
    """Say (stderr) which values of a config the bundle carries in clear that look like secrets: the
    bundle copies configs as they are, and whoever receives it can read them."""
    places = secret_places(config) if isinstance(config, dict) else []
    if places:
        print(
            f"warning: {path} carries what looks like secrets, copied into the bundle as written: "
            f"{', '.join(places)}; an attached server's key can come from an environment variable "
            "instead (api_key_env)",
            file=sys.stderr,
        )


def _fill(
    root: Path,
    loaded: dict[str, tuple[Path, dict[str, Any]]],
    python_version: str,
    platforms: list[str],
    extras: list[str],
    with_models: bool,
    source_root: Path,
) -> dict[str, Any]:
    commit, dirty = copy_project(source_root, root / "project")
    requirements = project_requirements(source_root / "pyproject.toml", extras)
    built = download_wheels(requirements, python_version, platforms, root / "wheels")
    fetched_models: dict[str, dict[str, Any]] = {}
    sources: dict[str, dict[str, Any]] = {}
    engine_pins: list[dict[str, Any]] = []
    config_entries = []
    for stem, (path, config) in sorted(loaded.items()):
        cache = cache_root(config.get("cache_dir") or None)
        for spec in (config.get("engines") or {}).values():
            if "source" in spec:
                entry = _bundle_source(spec["source"], cache, root / "sources")
                sources[entry["file"]] = entry
            # An engine on a site's own interpreter (vllm's `python`) brings nothing to carry.
            if "distribution" in spec and not spec.get("python") and spec not in engine_pins:
                engine_pins.append(spec)
        local = {}
        for model, spec in (config.get("models") or {}).items():
            if "sha256" not in spec:
                continue  # synthetic weights: made on the node from their donor, which is bundled
            if "path" in spec:
                local[model] = spec["sha256"]
            if spec["sha256"] not in fetched_models:
                fetched_models[spec["sha256"]] = {"name": model, "sha256": spec["sha256"], "file": ""}
                if with_models:
                    fetched_models[spec["sha256"]]["file"] = _bundle_model(
                        model, spec, cache, root, source_root
                    )
        (root / "configs").mkdir(exist_ok=True)
        shutil.copyfile(path, root / "configs" / f"{stem}.yaml")  # a user edits configs in place: no link
        config_entries.append({"file": f"configs/{stem}.yaml", "local_models": local})
    engine_wheels = bundle_engine_wheels(engine_pins, python_version, platforms, root / ENGINE_WHEELS)
    return {
        "format": 1,
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "project_commit": commit,
        "project_dirty": dirty,
        "python_version": python_version,
        "implementation": "cp",
        "platforms": platforms,
        "extras": extras,
        "requirements": requirements,
        "built_from_sdist": built,
        "configs": config_entries,
        "config_cache_dirs": sorted({c.get("cache_dir") or "" for _, c in loaded.values()} - {""}),
        "models": sorted(fetched_models.values(), key=lambda m: m["name"]),
        "sources": sorted(sources.values(), key=lambda s: s["file"]),
        "engine_wheels": engine_wheels,
    }


# An engine installed into a venv of its own at build time (vllm): its wheels for the target, where the
# printed command points pip (PIP_FIND_LINKS; the index stays off).
ENGINE_WHEELS = "engine-wheels"


def bundle_engine_wheels(
    specs: list[dict[str, Any]], python_version: str, platforms: list[str], dest: Path
) -> dict[str, Any] | None:
    """The wheels each pinned engine distribution installs (with its dependencies unless the entry says
    no_deps) for the target; None where no engine of the configs installs one."""
    if not specs:
        return None
    pins = []
    for spec in specs:
        lines = pip_lines(spec)
        if spec.get("sha256"):
            # pip checks each wheel against its pin (hash-checking mode: every line carries one).
            with tempfile.TemporaryDirectory() as scratch:
                listed = Path(scratch) / "requirements.txt"
                listed.write_text("\n".join(lines) + "\n", encoding="utf-8")
                download_wheels(
                    ["--require-hashes", "-r", str(listed)], python_version, platforms, dest, True
                )
        else:
            download_wheels(lines, python_version, platforms, dest, no_deps=bool(spec.get("no_deps")))
        pins += requirement_names(spec)
    return {
        "folder": ENGINE_WHEELS,
        "requirements": pins,
        "files": sorted(p.name for p in dest.glob("*.whl")),
    }


def copy_project(source_root: Path, dest: Path) -> tuple[str, bool]:
    """The committed tree (git archive HEAD) without results/; return its commit and whether the
    checkout had uncommitted changes (which the bundle does not carry)."""

    def git(*args: str) -> bytes:
        result = subprocess.run(["git", "-C", str(source_root), *args], capture_output=True)
        if result.returncode != 0:
            raise WhichshotError(f"git {args[0]} in {source_root} failed: {result.stderr.decode().strip()}")
        return result.stdout

    commit = git("rev-parse", "HEAD").decode().strip()
    dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    if dirty:
        print(
            f"note: {source_root} has uncommitted changes; the bundle carries commit {commit}",
            file=sys.stderr,
        )
    with tarfile.open(fileobj=io.BytesIO(git("archive", "--format=tar", "HEAD"))) as archive:
        kept = [m for m in archive.getmembers() if m.name.split("/")[0] != "results"]
        archive.extractall(dest, members=kept, filter="data")
    return commit, dirty


def project_requirements(pyproject: Path, extras: list[str]) -> list[str]:
    """The pinned dependencies, those of the chosen extras, and the build backend's requirements
    (the editable install builds the project offline)."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    optional = data["project"].get("optional-dependencies", {})
    unknown = sorted(set(extras) - set(optional))
    if unknown:
        raise WhichshotError(
            f"no extra {', '.join(unknown)} in {pyproject}; extras: {', '.join(sorted(optional))}"
        )
    chosen = [req for extra in extras for req in optional[extra]]
    return list(dict.fromkeys([*data["project"]["dependencies"], *chosen, *data["build-system"]["requires"]]))


def download_wheels(
    requirements: list[str], python_version: str, platforms: list[str], dest: Path, no_deps: bool = False
) -> list[str]:
    """Wheels of every requirement and its dependencies for the target, with pip. A distribution
    with no wheel is built from its sdist here, once (kept in the user cache), and must build a
    pure-Python wheel: a platform wheel built here would not be the target's. Returns those wheels."""
    built_dir = cache_root() / "offline" / "built-wheels"
    built_dir.mkdir(parents=True, exist_ok=True)
    built: list[str] = []
    for _ in range(MAX_SDIST_BUILDS):
        argv = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            "--python-version",
            python_version,
            "--implementation",
            "cp",
            "--find-links",
            str(built_dir),
            "-d",
            str(dest),
            *(["--no-deps"] if no_deps else []),
        ]
        for name in expand_platforms(platforms):
            argv += ["--platform", name]
        result = subprocess.run([*argv, *requirements], capture_output=True, text=True)
        if result.returncode == 0:
            # Built now or by an earlier bundle: the wheels pip took from the built ones.
            return sorted(p.name for p in dest.glob("*.whl") if (built_dir / p.name).is_file())
        missing = re.search(r"No matching distribution found for (\S+)", result.stderr)
        if not missing or missing.group(1) in built:
            tail = "\n".join(result.stderr.strip().splitlines()[-8:])
            raise WhichshotError(f"pip could not download the wheels for Python {python_version}:\n{tail}")
        _build_pure_wheel(missing.group(1), built_dir)
        built.append(missing.group(1))
    raise WhichshotError(f"more than {MAX_SDIST_BUILDS} requirements have no wheel for the target")


def _build_pure_wheel(requirement: str, built_dir: Path) -> None:
    name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    with tempfile.TemporaryDirectory() as scratch:
        wheels = Path(scratch)
        # A wheel for this machine means the project ships wheels, none for the target: building
        # its sdist here (a compiler's work, for this machine) would not help the target.
        here = [*pip, "download", "--no-deps", "--only-binary=:all:", "-d", str(wheels / "here"), requirement]
        if subprocess.run(here, capture_output=True, text=True).returncode == 0:
            raise WhichshotError(
                f"{requirement} has wheels, none for the target's Python and --platform: if the node's "
                "glibc runs a newer manylinux, name that --platform (e.g. manylinux_2_28_x86_64)"
            )
        built = [*pip, "wheel", "--no-deps", "--no-binary", name, "-w", str(wheels), requirement]
        if subprocess.run(built, capture_output=True, text=True).returncode != 0:
            raise WhichshotError(
                f"{requirement} has no wheel and its sdist does not build: pip wheel {requirement}"
            )
        for wheel in wheels.glob("*.whl"):
            if not wheel.name.endswith("-none-any.whl"):
                raise WhichshotError(
                    f"{requirement} has no wheel for the target and its sdist builds {wheel.name}, a wheel "
                    "for this machine only: build it on a machine like the target and pass its folder to pip"
                )
            shutil.copyfile(wheel, built_dir / wheel.name)


def expand_platforms(platforms: list[str]) -> list[str]:
    """What a target of these platforms installs: pip takes --platform literally, so glibc 2.28
    (manylinux_2_28) must also name 2.27 down to 2.5 and the legacy manylinux names."""
    expanded = []
    for name in platforms:
        legacy = re.fullmatch(r"(manylinux2014|manylinux2010|manylinux1)_(\w+)", name)
        modern = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", name)
        if legacy:
            glibc, arch = LEGACY_MANYLINUX[legacy.group(1)], legacy.group(2)
        elif modern:
            glibc, arch = int(modern.group(1)), modern.group(2)
        else:
            expanded.append(name)
            continue
        for minor in range(glibc, 4, -1):
            expanded.append(f"manylinux_2_{minor}_{arch}")
            expanded += [f"{old}_{arch}" for old, at in LEGACY_MANYLINUX.items() if at == minor]
    return list(dict.fromkeys(expanded))


def this_machine_platform() -> str:
    """The platform tag of this machine (manylinux_2_<glibc minor>_<arch> on a glibc Linux)."""
    libc, version = platform.libc_ver()
    if sys.platform == "linux" and libc == "glibc" and version:
        major, minor = version.split(".")[:2]
        return f"manylinux_{major}_{minor}_{platform.machine()}"
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _bundle_source(source: dict[str, Any], cache: Path, dest: Path) -> dict[str, Any]:
    sdist = pypi.download(source["package"], source["version"], cache / "sources", sdist=True)
    pypi.verify_sha256(sdist, source["sha256"], f"{source['package']}=={source['version']} sdist")
    _link_or_copy(sdist, dest / sdist.name)
    return {
        "package": source["package"],
        "version": source["version"],
        "sha256": source["sha256"],
        "file": f"sources/{sdist.name}",
    }


def _bundle_model(name: str, spec: dict[str, Any], cache: Path, root: Path, source_root: Path) -> str:
    """The verified GGUF (fetched through the user cache) linked into models/<sha256>.gguf."""
    if "path" in spec and not Path(spec["path"]).expanduser().is_file():
        spec = _packaged_elsewhere(name, spec, source_root)
    path = fetch_model(name, spec, cache)
    target = root / "models" / f"{spec['sha256']}.gguf"
    _link_or_copy(path, target)
    return target.relative_to(root).as_posix()


def _packaged_elsewhere(name: str, spec: dict[str, Any], source_root: Path) -> dict[str, Any]:
    # A config may read a model from a path on the machine it ran on (config/gpu-speedup-model.yaml):
    # another of the project's configs may pin the same file to wheels.
    for other in sorted((source_root / "config").glob("*.yaml")):
        for candidate in (yaml.safe_load(other.read_text(encoding="utf-8")).get("models") or {}).values():
            if candidate.get("sha256") == spec["sha256"] and "packages" in candidate:
                return candidate
    raise WhichshotError(
        f"model {name}: {spec['path']} does not exist here, and no config in {source_root / 'config'} pins "
        f"sha256 {spec['sha256']} to wheels; place the file there or build with --without-models"
    )


def _link_or_copy(source: Path, target: Path) -> None:
    # Cached models are replaced by rename, never written in place: a hard link is a safe copy.
    # Two configs may pin one file (the same engine sdist): it is bundled once.
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and target.samefile(source):
        return
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def bundle_summary(root: Path) -> dict[str, Any]:
    """Files and bytes in all and per top folder."""
    parts: dict[str, dict[str, int]] = {}
    for path in root.rglob("*"):
        if path.is_file():
            top = path.relative_to(root).parts[0] if path.parent != root else "."
            entry = parts.setdefault(top, {"files": 0, "bytes": 0})
            entry["files"] += 1
            entry["bytes"] += path.stat().st_size
    return {
        "files": sum(p["files"] for p in parts.values()),
        "bytes": sum(p["bytes"] for p in parts.values()),
        "parts": dict(sorted(parts.items())),
    }


def format_summary(where: Path, summary: dict[str, Any]) -> str:
    """One line for the bundle and one per top folder."""
    lines = [f"{where}: {summary['files']} files, {summary['bytes'] / 2**20:.1f} MiB"]
    lines += [
        f"  {top:10} {p['files']:5} files {p['bytes'] / 2**20:10.1f} MiB"
        for top, p in summary["parts"].items()
    ]
    return "\n".join(lines)


def _readme(name: str, described: dict[str, Any]) -> str:
    missing = [m["name"] for m in described["models"] if not m["file"]]
    lines = [
        f"whichshot offline bundle {name}: commit {described['project_commit']}, Python "
        f"{described['python_version']} ({', '.join(described['platforms'])}), configs "
        f"{', '.join(c['file'] for c in described['configs'])}.",
        "Install on the offline node (standard library only; checks every file against "
        f"{MANIFEST} first): python{described['python_version']} {name}/install.py --venv DIR [--cache DIR]",
        "It prints the snakemake command that runs each config.",
    ]
    if missing:
        lines.append(f"Models left out (the installer says where to place them): {', '.join(missing)}.")
    return "\n".join(lines) + "\n"


def _stem(path: Path) -> str:
    return path.name.removesuffix(".yaml").removesuffix(".yml")


def _tar(root: Path, out: Path) -> None:
    # Uncompressed: the wheels and the quantised models barely compress, and tar xf stays fast.
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    with tarfile.open(partial, "w") as archive:
        archive.add(root, arcname=root.name)
    os.replace(partial, out)
