"""Install an offline bundle on a node without network: the standard library only.

The node has no whichshot yet, so the bundle carries this file as install.py and runs it with any
python3 of the bundle's target version:

    python3 BUNDLE/install.py --venv DIR [--cache DIR]

It unpacks a .tar by the rules of tarfile's data filter (also where tarfile has none), checks every
file against the bundle's manifest before the folder takes its place, makes the venv, installs the
project and its pinned wheels with pip's index switched off, copies the models and engine sources
into the cache where the pipeline's fetch steps look first, and prints the command that runs each
config. Nothing here may reach the network: pip runs with --no-index, and the printed command sets
PIP_NO_INDEX so a pipeline step that misses the cache fails instead of downloading.
"""

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import venv
from pathlib import Path, PurePosixPath

MANIFEST = "manifest-sha256.txt"
DESCRIPTION = "bundle.json"
# The editable install and a run write into the project folder: its new files are never listed.
RUN_OUTPUTS = ("project/",)
SHA256 = re.compile("[0-9a-f]{64}")


class BundleError(Exception):
    """One line saying why the bundle cannot be installed."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="install.py", description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument(
        "bundle",
        nargs="?",
        default=str(Path(__file__).resolve().parent),
        help="the bundle folder or .tar (default: this file's folder)",
    )
    args = parser.parse_args(argv)
    try:
        install(Path(args.bundle), Path(args.venv), cache_dir(args.cache), args.cores)
    except BundleError as exc:
        print(f"install: {exc}", file=sys.stderr)
        return 1
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The installer's options (also those of `python -m whichshot.offline install`)."""
    parser.add_argument("--venv", required=True, help="the virtual environment to create or reuse")
    parser.add_argument("--cache", help="whichshot's cache to seed (default: what the pipeline uses)")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="cores in the printed command")


def cache_dir(given: str | None) -> Path:
    """The cache the pipeline reads when a config leaves cache_dir empty (whichshot.cache.cache_root)."""
    if given:
        return Path(given).expanduser().resolve()
    if os.environ.get("WHICHSHOT_CACHE"):
        return Path(os.environ["WHICHSHOT_CACHE"]).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).resolve() / "whichshot"


def install(bundle: Path, venv_dir: Path, cache: Path, cores: int) -> list[str]:
    """Verify, install and seed; return (and print) the command that runs each config."""
    root = unpacked(bundle)
    described = described_bundle(root)
    check_interpreter(described)
    venv_dir = venv_dir.expanduser().resolve()
    python = make_venv(venv_dir)
    pip_install(python, root, described["extras"])
    caches = {cache, *(Path(c).expanduser().resolve() for c in described["config_cache_dirs"] if c)}
    for target in sorted(caches):
        seed_cache(root, described, target)
    missing = [m for m in described["models"] if not m["file"]]
    for model in missing:
        print(
            f"not in the bundle: model {model['name']} (sha256 {model['sha256']}); place its GGUF "
            f"at {cache / 'models' / (model['sha256'] + '.gguf')} before running"
        )
    wheels = described.get("engine_wheels")
    engine_wheels = root / wheels["folder"] if wheels else None
    commands = [
        run_command(root, venv_dir, cache, cores, config, engine_wheels) for config in described["configs"]
    ]
    print(f"installed {root} into {venv_dir}; cache {cache}")
    for command in commands:
        print(command)
    return commands


def unpacked(bundle: Path) -> Path:
    """The bundle's folder, checked against its manifest. A .tar is unpacked beside itself (once):
    into a scratch folder first, which becomes the bundle's folder only once every file matches."""
    bundle = bundle.expanduser().resolve()
    if bundle.is_dir():
        return checked(bundle)
    if not bundle.is_file() or not tarfile.is_tarfile(bundle):
        raise BundleError(f"{bundle} is neither a bundle folder nor a tar file")
    with tarfile.open(bundle) as archive:
        members = _rooted(bundle, archive.getmembers())
        top = _checked_members(bundle, members)
        root = bundle.parent / top
        if root.exists():
            return checked(root)
        scratch = Path(tempfile.mkdtemp(prefix=f".{top}.partial-", dir=bundle.parent))
        try:
            _extract(archive, members, scratch)
            os.rename(checked(scratch / top), root)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return root


def checked(root: Path) -> Path:
    """root, once every file matches the manifest."""
    problems = verify(root)
    if problems:
        raise BundleError(f"{root} does not match its manifest: " + "; ".join(problems[:5]))
    return root


def _rooted(bundle: Path, members: list[tarfile.TarInfo]) -> list[tarfile.TarInfo]:
    """The members below one top folder. `tar cf x.tar .` inside the bundle's folder writes a "."
    member and the bundle's files at the top: they go below a folder named after the tar (x)."""
    members = [m for m in members if PurePosixPath(m.name).parts]  # "." and "./" are the folder itself
    names = {PurePosixPath(m.name) for m in members}
    if PurePosixPath(MANIFEST) not in names or not all(_inside(m.name) for m in members):
        return members
    top = _tar_stem(bundle.name)
    for member in members:
        member.name = f"{top}/{PurePosixPath(member.name).as_posix()}"
        if member.islnk() and _inside(member.linkname):
            member.linkname = f"{top}/{PurePosixPath(member.linkname).as_posix()}"
    return members


def _tar_stem(name: str) -> str:
    for suffix in (".tar.gz", ".tar.xz", ".tar.bz2", ".tgz", ".tar"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name + ".d"


def _checked_members(bundle: Path, members: list[tarfile.TarInfo]) -> str:
    """The one top folder, once every member passes the rules of tarfile's data filter, ported for
    the Pythons that lack it (before 3.11.4: Debian 12's 3.11.2) and kept where it exists."""
    symlinks = {PurePosixPath(m.name) for m in members if m.issym()}
    files: set[PurePosixPath] = set()
    seen: set[PurePosixPath] = set()
    for member in members:
        problem = _member_problem(member, symlinks, files, seen)
        if problem:
            raise BundleError(
                f"{bundle}: member {member.name!r} {problem}; a bundle holds files, folders and links "
                "inside its folder only"
            )
    top = {PurePosixPath(m.name).parts[0] for m in members}
    if len(top) != 1:
        raise BundleError(f"{bundle} must hold one top folder, holds {sorted(top)}")
    return top.pop()


def _member_problem(
    member: tarfile.TarInfo,
    symlinks: set[PurePosixPath],
    files: set[PurePosixPath],
    seen: set[PurePosixPath],
) -> str | None:
    """Why a member may not be extracted (None: it may). files and seen grow with each member."""
    name = PurePosixPath(member.name)
    if not _inside(member.name):
        return "has an absolute path or a '..' part"
    if name in seen:
        return "is given twice"  # the second would write through whatever the first made
    seen.add(name)
    through = next((parent for parent in name.parents if parent in symlinks), None)
    if through is not None:
        return f"lies under the symlink {through.as_posix()!r}"
    if member.issym():
        return _symlink_problem(name, member.linkname, symlinks)
    if member.islnk():
        if PurePosixPath(member.linkname) not in files:
            return f"is a hard link to {member.linkname!r}, not to a file of the bundle before it"
        return None
    if member.isreg():
        files.add(name)
        return None
    return None if member.isdir() else "is a device, FIFO or other special file"


def _symlink_problem(name: PurePosixPath, target: str, symlinks: set[PurePosixPath]) -> str | None:
    """A symlink points inside the top folder by a relative path that passes through no other
    symlink (so the path as written is where it leads: profiles -> workflow/profiles)."""
    outside = f"links to {target!r}, outside the bundle's folder"
    if PurePosixPath(target).is_absolute():
        return outside
    walked = list(name.parent.parts)
    parts = [part for part in PurePosixPath(target).parts if part != "."]
    for index, part in enumerate(parts):
        if part == "..":
            if len(walked) <= 1:  # above the top folder
                return outside
            walked.pop()
            continue
        walked.append(part)
        if PurePosixPath(*walked) in symlinks and index < len(parts) - 1:
            return f"links to {target!r} through the symlink {'/'.join(walked)!r}"
    return None if walked and walked[0] == name.parts[0] else outside


def _inside(name: str) -> bool:
    """A relative path with no '..' part: one that stays below the folder it is read from."""
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts


def _extract(archive: tarfile.TarFile, members: list[tarfile.TarInfo], dest: Path) -> None:
    """Every member, checked, into dest; owners and modes as the data filter leaves them."""
    for member in members:
        member.uid, member.gid, member.uname, member.gname = os.getuid(), os.getgid(), "", ""
        if member.isreg() or member.isdir():
            member.mode = (member.mode & 0o755) | (0o700 if member.isdir() else 0o600)
    try:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(dest, members=members, filter="data")
        else:
            archive.extractall(dest, members=members)  # noqa: S202 - every member checked above
    except (OSError, tarfile.TarError) as exc:
        raise BundleError(f"{archive.name}: could not unpack ({exc})") from None


def verify(root: Path) -> list[str]:
    """Files missing, altered, or present yet not listed (the project folder may gain run outputs)."""
    manifest = root / MANIFEST
    if not manifest.is_file():
        return [f"no {MANIFEST}"]
    listed = {}
    for number, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), start=1):
        digest, _, name = line.partition("  ")
        if not SHA256.fullmatch(digest) or not _inside(name):
            return [f"{MANIFEST} line {number} is not '<sha256: 64 hex digits>  <path>'"]
        listed[name] = digest
    problems = []
    for name, digest in sorted(listed.items()):
        path = root / name
        if not path.is_file():
            problems.append(f"missing: {name}")
        elif sha256_file(path) != digest:
            problems.append(f"altered: {name}")
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        name = path.relative_to(root).as_posix()
        if name not in listed and name != MANIFEST and not name.startswith(RUN_OUTPUTS):
            problems.append(f"not listed: {name}")
    return problems


def described_bundle(root: Path) -> dict:
    """bundle.json, once its pins are sha256s and its files are files of the manifest: its values
    become paths in the cache and the venv."""
    try:
        described = json.loads((root / DESCRIPTION).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BundleError(f"{root / DESCRIPTION} is not readable JSON ({exc})") from None
    listed = {line.partition("  ")[2] for line in (root / MANIFEST).read_text(encoding="utf-8").splitlines()}
    for part, index, key, value in _described_values(described):
        where = f"{root / DESCRIPTION}: {part}[{index}].{key}"
        if key == "sha256" and not (isinstance(value, str) and SHA256.fullmatch(value)):
            raise BundleError(f"{where} {value!r} is not a sha256 (64 hex digits)")
        if key == "file" and value not in listed:
            raise BundleError(f"{where} {value!r} is not a file of the bundle's manifest")
    return described


def _described_values(described: dict):
    """(part, index, key, value) of every pin and file bundle.json names; a model left out of the
    bundle names no file ("")."""
    for part in ("models", "sources"):
        for index, entry in enumerate(described.get(part) or []):
            yield part, index, "sha256", entry.get("sha256")
            if part == "sources" or entry.get("file"):
                yield part, index, "file", entry.get("file")
    for index, config in enumerate(described.get("configs") or []):
        yield "configs", index, "file", config.get("file")
        for sha256 in (config.get("local_models") or {}).values():
            yield "configs", index, "sha256", sha256


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_interpreter(described: dict) -> None:
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if running != described["python_version"]:
        raise BundleError(
            f"the bundle's wheels are for Python {described['python_version']}, this is {running} "
            f"({sys.executable}): run install.py with a python{described['python_version']}"
        )


def make_venv(venv_dir: Path) -> Path:
    python = venv_dir / "bin" / "python"
    if not python.exists():
        try:
            venv.EnvBuilder(with_pip=True).create(venv_dir)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise BundleError(
                f"could not create the venv {venv_dir} with {sys.executable} ({exc}); a distribution's "
                "python may lack ensurepip (Debian and Ubuntu: the python3-venv package)"
            ) from None
    return python


def pip_install(python: Path, root: Path, extras: list[str]) -> None:
    """The project, editable, and every dependency from the bundle's wheels; the index is off."""
    project = str(root / "project") + (f"[{','.join(extras)}]" if extras else "")
    argv = [
        str(python),
        "-m",
        "pip",
        "install",
        "--no-index",
        "--find-links",
        str(root / "wheels"),
        "--disable-pip-version-check",
        "--no-cache-dir",
        "-e",
        project,
    ]
    # The node's pip configuration (an index, find-links, constraints) must not add sources.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-15:])
        raise BundleError(f"pip could not install from the bundle's wheels:\n{tail}")


def seed_cache(root: Path, described: dict, cache: Path) -> None:
    """Models as <cache>/models/<sha256>.gguf and engine sdists in <cache>/sources/: the names the
    pipeline's fetch steps find before they would download anything."""
    for model in described["models"]:
        if model["file"]:
            _copy_in(root / model["file"], cache / "models" / f"{model['sha256']}.gguf", model["sha256"])
    for source in described["sources"]:
        _copy_in(root / source["file"], cache / "sources" / Path(source["file"]).name, source["sha256"])


def _copy_in(source: Path, target: Path, sha256: str) -> None:
    if target.is_file() and sha256_file(target) == sha256:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.copyfile(source, partial)
    os.replace(partial, target)


def run_command(
    root: Path, venv_dir: Path, cache: Path, cores: int, config: dict, engine_wheels: Path | None = None
) -> str:
    """The shell command that runs one config from the bundle's project folder, offline (an engine that
    installs its own venv, vllm, installs it from the bundle's engine wheels)."""
    files = [f"../{config['file']}"]
    if config["local_models"]:
        # A model read from a local path on the connected machine is read from the cache here: this
        # file, given after the config, replaces its path (the sha256 pin stays the config's).
        overlay = venv_dir / "whichshot-configs" / f"{Path(config['file']).stem}.local-models.json"
        overlay.parent.mkdir(parents=True, exist_ok=True)
        paths = {
            name: {"path": str(cache / "models" / f"{sha}.gguf")}
            for name, sha in config["local_models"].items()
        }
        overlay.write_text(json.dumps({"models": paths}, indent=1) + "\n", encoding="utf-8")
        files.append(str(overlay))
    env = [
        f'PATH={shlex.quote(str(venv_dir / "bin"))}:"$PATH"',
        f"WHICHSHOT_CACHE={shlex.quote(str(cache))}",
        "PIP_NO_INDEX=1",
    ]
    if engine_wheels is not None:
        env.append(f"PIP_FIND_LINKS={shlex.quote(str(engine_wheels))}")
    # --cores last: --configfile takes every word up to the next option, so targets can follow.
    snakemake = ["snakemake", "--replace-workflow-config", "--configfile", *files, "--cores", str(cores)]
    return f"cd {shlex.quote(str(root / 'project'))} && env {' '.join(env)} {shlex.join(snakemake)}"


if __name__ == "__main__":
    sys.exit(main())
