"""vLLM's "build": a virtual environment of its own in the whichshot cache, one per pinned distribution
and version, whose lock (every distribution it holds, its version and its archive's sha256) is what
the build id hashes. pip resolves the pins once; the lock then says what that resolution was."""

import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from whichshot.atomic import write_json_atomic
from whichshot.errors import WhichshotError
from whichshot.hashing import sha256_file, short_id

LOCK_FILE = "lock.json"
BUILD_FILE = "build.json"
# Installing several GB takes minutes: long, but never without end.
PIP_TIMEOUT_S = 3600.0


def install_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """What decides the venv before pip resolves it: the pins, the install options, this Python."""
    return {
        "engine": "vllm",
        "distribution": spec["distribution"],
        "version": spec["version"],
        "requirements": list(spec["requirements"]),
        "without": list(spec["without"]),
        "no_deps": spec["no_deps"],
        "system_site_packages": spec["system_site_packages"],
        "python_version": platform.python_version(),
        "machine": platform.machine(),
    }


def venv_python(home: Path) -> Path:
    return home / "venv" / "bin" / "python"


def cached_build(home: Path) -> dict[str, Any] | None:
    """The build recorded in `home`, if its venv still holds exactly the distributions of its lock."""
    recorded = home / BUILD_FILE
    if not recorded.is_file() or not venv_python(home).exists():
        return None
    build = json.loads(recorded.read_text())
    try:
        installed = installed_versions(venv_python(home))
    except WhichshotError:
        return None
    return build if installed == {d["name"]: d["version"] for d in build["lock"]} else None


def install(home: Path, spec: dict[str, Any], install: dict[str, Any]) -> dict[str, Any]:
    """Make the venv, install the pins, remove `without`, and record the lock and build.json."""
    started = time.monotonic()
    shutil.rmtree(home / "venv", ignore_errors=True)
    home.mkdir(parents=True, exist_ok=True)
    site = ["--system-site-packages"] if spec["system_site_packages"] else []
    _run([sys.executable, "-m", "venv", *site, str(home / "venv")])
    python = venv_python(home)
    report = home / "pip-report.json"
    pins = [f"{spec['distribution']}=={spec['version']}", *spec["requirements"]]
    no_deps = ["--no-deps"] if spec["no_deps"] else []
    _run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "--report", str(report),
          *no_deps, *pins])  # fmt: skip
    if spec["without"]:
        _run([str(python), "-m", "pip", "uninstall", "--disable-pip-version-check", "-y", *spec["without"]])
    lock = venv_lock(python, json.loads(report.read_text()))
    write_json_atomic(home / LOCK_FILE, lock)
    identity = {**install, "lock_sha256": short_id(lock, length=64)}
    build = {
        "build_id": short_id(identity),
        "identity": identity,
        "build_seconds": round(time.monotonic() - started, 1),
        "built_at_unix_s": int(time.time()),
        "binaries": {"python": {"path": str(python), "sha256": sha256_file(python.resolve())}},
        "python": str(python),
        "home": str(home),
        "lock": lock,
        "venv_bytes": folder_bytes(home / "venv"),
    }
    write_json_atomic(home / BUILD_FILE, build)
    return build


def venv_lock(python: Path, report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every distribution the venv holds (pip inspect), with the sha256 of the archive pip installed it
    from (pip's install report); None for one it did not install (a system site package)."""
    hashes = {}
    for item in report.get("install", []):
        name = _normal(item["metadata"]["name"])
        archive = (item.get("download_info") or {}).get("archive_info") or {}
        sha256 = (archive.get("hashes") or {}).get("sha256") or _sha256_of_local(item["download_info"])
        hashes[name] = {"sha256": sha256, "url": item["download_info"].get("url")}
    lock = []
    for name, version in sorted(installed_versions(python).items()):
        known = hashes.get(name, {})
        lock.append({"name": name, "version": version, "sha256": known.get("sha256"),
                     "source": known.get("url") or "present before the install (system site)"})  # fmt: skip
    return lock


def installed_versions(python: Path) -> dict[str, str]:
    """Distribution name (normalised) -> version, as pip inspect sees the venv."""
    result = _run([str(python), "-m", "pip", "inspect", "--disable-pip-version-check"], capture=True)
    try:
        installed = json.loads(result)["installed"]
    except (ValueError, KeyError) as exc:
        raise WhichshotError(f"pip inspect of {python} gave no readable list: {exc}") from None
    return {_normal(d["metadata"]["name"]): d["metadata"]["version"] for d in installed}


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _sha256_of_local(download_info: dict[str, Any]) -> str | None:
    url = download_info.get("url", "")
    if url.startswith("file://") and Path(url[7:]).is_file():
        return sha256_file(Path(url[7:]))
    return None


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _run(argv: list[str], capture: bool = False) -> str:
    """One install step; its output goes to the rule's log (sys.stdout), its failure into one line."""
    result = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    if not capture:
        sys.stdout.write(result.stdout + result.stderr)
    if result.returncode != 0:
        tail = " ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise WhichshotError(f"vLLM venv: {' '.join(argv[1:4])} ... exited with {result.returncode}: {tail}")
    return result.stdout
