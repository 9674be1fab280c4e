"""Which distributions an engine's wheel needs that a target image lacks: its requirements (Requires-Dist,
markers evaluated for the target, no extras) whose names the image does not list, and theirs in turn.
What the image holds is taken as it is (its own dependencies included), so only what is missing
travels, each pinned to the version and wheel sha256 one resolution for the target chose."""

import re
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from whichshot.errors import WhichshotError


def normalise(name: str) -> str:
    """A distribution's name as the package index compares names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def target_environment(python_version: str, machine: str = "x86_64") -> dict[str, str]:
    """The marker variables of a CPython `python_version` on Linux (`machine`), no extra asked for."""
    return {
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "implementation_name": "cpython",
        "implementation_version": f"{python_version}.0",
        "platform_python_implementation": "CPython",
        "os_name": "posix",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": machine,
        "platform_release": "",
        "platform_version": "",
        "extra": "",
    }


def image_packages(listing: Path) -> set[str]:
    """The distributions a machine image holds: one name a line, '#' comments (device_image_packages.txt)."""
    lines = (line.split("#")[0].strip() for line in listing.read_text(encoding="utf-8").splitlines())
    return {normalise(line) for line in lines if line}


def needed(
    requires_dist: list[str], environment: dict[str, str], extras: frozenset[str]
) -> dict[str, set[str]]:
    """Name -> extras asked of it, for the requirements that apply on the target: a marker holds with no
    extra or with one of `extras` (those the requirement on this distribution named)."""
    names: dict[str, set[str]] = {}
    for line in requires_dist:
        try:
            requirement = Requirement(line)
        except InvalidRequirement as exc:
            raise WhichshotError(f"unreadable requirement {line!r}: {exc}") from None
        marker = requirement.marker
        if marker is None or any(marker.evaluate({**environment, "extra": e}) for e in ("", *extras)):
            names.setdefault(normalise(requirement.name), set()).update(requirement.extras)
    return names


def lacking(
    roots: list[str],
    resolved: dict[str, dict[str, Any]],
    have: set[str],
    environment: dict[str, str],
    skip: frozenset[str] = frozenset(),
) -> list[str]:
    """The distributions below `roots` the image lacks, in the order they are first reached: each
    requirement of a root (and, recursively, of each lacking one, with the extras asked of it) that the
    image does not list and `skip` does not name. `resolved` maps a normalised name to its resolution
    ({"requires_dist": [...]}: pip's install report's metadata); a lacking name it does not hold is an
    error, not a silent gap."""
    roots = [normalise(root) for root in roots]
    asked: dict[str, set[str]] = {root: set() for root in roots}
    queue = list(roots)
    while queue:
        name = queue.pop(0)
        if name not in resolved:
            raise WhichshotError(f"{name} is needed and not in the resolution: resolve it for the target")
        wanted = needed(resolved[name].get("requires_dist") or [], environment, frozenset(asked[name]))
        for dependency, extras in wanted.items():
            if dependency in have or dependency in skip:
                continue
            first = dependency not in asked
            known = asked.setdefault(dependency, set())
            if first or not extras <= known:  # new, or asked for more extras: read its requirements again
                known.update(extras)
                if dependency not in queue:
                    queue.append(dependency)
    return [name for name in asked if name not in roots]


def report_resolution(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """pip's install report (--report) as name -> {name, version, requires_dist, sha256, file}."""
    resolved = {}
    for item in report["install"]:
        metadata = item["metadata"]
        archive = (item.get("download_info") or {}).get("archive_info") or {}
        url = (item.get("download_info") or {}).get("url", "")
        resolved[normalise(metadata["name"])] = {
            "name": normalise(metadata["name"]),
            "version": metadata["version"],
            "requires_dist": metadata.get("requires_dist") or [],
            "sha256": (archive.get("hashes") or {}).get("sha256"),
            "file": url.rsplit("/", 1)[-1],
        }
    return resolved


def pins(names: list[str], resolved: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    """{pin: name==version, sha256} of each name, sorted: a vllm entry's `requirements` (hash-checked)."""
    out = []
    for name in sorted(names):
        entry = resolved[name]
        if not entry["sha256"]:
            raise WhichshotError(f"the resolution gave no sha256 for {name} ({entry['file']})")
        out.append({"pin": f"{name}=={entry['version']}", "sha256": entry["sha256"]})
    return out


def pip_lines(spec: dict[str, Any]) -> list[str]:
    """An engine entry's distribution and requirements as pip requirement-file lines; a pinned
    sha256 becomes `--hash=sha256:...` (pip then checks every line's hash)."""
    top = f"{spec['distribution']}=={spec['version']}"
    lines = [f"{top} --hash=sha256:{spec['sha256']}" if spec.get("sha256") else top]
    for item in spec.get("requirements") or []:
        lines.append(f"{item['pin']} --hash=sha256:{item['sha256']}" if isinstance(item, dict) else item)
    return lines


def requirement_names(spec: dict[str, Any]) -> list[str]:
    """The pins of an engine entry without their hashes (name==version or a requirement string)."""
    return [line.split(" --hash=")[0] for line in pip_lines(spec)]
