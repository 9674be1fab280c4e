"""results/archive/<run_id>.tar.gz: a run's tables, report, resolved config, engine builds and
environment, the workflow source that produced them, a sha256 manifest of every file, and a
Workflow Run RO-Crate (ro-crate-metadata.json) describing it all for WorkflowHub or Zenodo.

Unpacked, the archive is a workflow directory: the Snakefile and config/config.yaml at the top,
the results under results/ exactly where the pipeline wrote them."""

import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from whichshot.archive.run_crate import write_run_crate
from whichshot.archive.run_environment import capture_environment
from whichshot.archive.user_inputs import archive_inputs
from whichshot.redact import redact_config

MANIFEST = "manifest-sha256.txt"
# The workflow source, relative to the repository root.
SOURCE_PATTERNS = (
    "Snakefile", "pyproject.toml", "README.md", "docs/*.md", "workflow/**/*", "whichshot/**/*.py",
    "whichshot/**/*.j2", "whichshot/**/*.yaml", "whichshot/**/*.rst", "engines/*.py", "claims/*.yaml",
)  # fmt: skip


def build_archive(
    results: Iterable[Path], workdir: Path, source_root: Path, config: dict[str, Any], out_path: Path
) -> None:
    """Write the archive of one finished run; results are paths relative to workdir."""
    run_id = config["run_id"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / run_id
        data = _copy_all(results, workdir, root)
        archive_inputs(root, config, [root / p for p in data if p.parts[:2] == ("results", "prompts")])
        source = _copy_all(source_files(source_root), source_root, root)
        _write(root / "config" / "config.yaml", yaml.safe_dump(redact_config(config), sort_keys=False))
        environment = {**capture_environment(), "workflow_source": git_identity(source_root)}
        _write(root / "environment.json", json.dumps(environment, indent=1, default=str))
        write_run_crate(root, config, data, source)
        write_manifest(root)
        _tar(root, out_path)


def source_files(source_root: Path) -> list[Path]:
    """The workflow's own files (no caches), relative to source_root."""
    found = set()
    for pattern in SOURCE_PATTERNS:
        for path in source_root.glob(pattern):
            if path.is_file() and "__pycache__" not in path.parts:
                found.add(path.relative_to(source_root))
    return sorted(found)


def git_identity(source_root: Path) -> dict[str, Any]:
    """Commit and dirty state of the checkout; 'not measured' outside a git work tree."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(source_root), *args], capture_output=True, text=True,
                              check=True, timeout=30).stdout.strip()  # fmt: skip

    try:
        return {"git_commit": git("rev-parse", "HEAD"), "git_dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError) as exc:
        return {"git_commit": f"not measured ({type(exc).__name__})", "git_dirty": None}


def write_manifest(root: Path) -> None:
    """sha256 of every file under root except the manifest itself (`sha256sum -c` reads it)."""
    lines = [f"{sha256_file(path)}  {path.relative_to(root).as_posix()}" for path in _files(root)
             if path.name != MANIFEST or path.parent != root]  # fmt: skip
    _write(root / MANIFEST, "\n".join(lines) + "\n")


def verify_manifest(root: Path) -> list[str]:
    """Problems found: files missing, altered, or not listed. Empty when the archive is intact."""
    listed = {}
    for line in (root / MANIFEST).read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    present = {p.relative_to(root).as_posix() for p in _files(root)} - {MANIFEST}
    problems = [f"not listed: {name}" for name in sorted(present - set(listed))]
    for name, digest in sorted(listed.items()):
        path = root / name
        if not path.is_file():
            problems.append(f"missing: {name}")
        elif sha256_file(path) != digest:
            problems.append(f"altered: {name}")
    return problems


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _copy_all(paths: Iterable[Path], base: Path, root: Path) -> list[Path]:
    copied = []
    for relative in paths:
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(base / relative, target)
        copied.append(Path(relative))
    return copied


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _tar(root: Path, out_path: Path) -> None:
    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(out_path.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        for path in [root, *sorted(root.rglob("*"))]:
            tar.add(path, arcname=path.relative_to(root.parent).as_posix(), recursive=False,
                    filter=_anonymous)  # fmt: skip
    partial.replace(out_path)


def _anonymous(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
