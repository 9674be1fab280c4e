"""What carrying a Python package to a machine without a package index costs: the wheels its
requirements resolve to for the target's Python and platform, less the distributions the target
already has, with their sizes from PyPI (needs the network here, not there).

Usage:
  python tools/carry_size.py torch-pins vllm 0.23.0 0.25.1 0.27.1
      which torch each release pins (a compiled package needs the target's own torch)
  python tools/carry_size.py size vllm==0.25.1 --have tools/device_image_packages.txt [--skip torch ...]
      the wheels to carry for cp312 manylinux x86_64 and their total size, largest first
  python tools/carry_size.py pins vllm==0.26.0 --have tools/device_image_packages.txt \
          --platform manylinux_2_31_x86_64 [--skip NAME ...]
      a vllm entry's hash-checked pins: the wheel's own sha256 and every distribution its requirements
      (and theirs, with the extras they ask for) need that the image lacks and --skip does not name,
      each at the version and wheel one resolution for the target chose (YAML for the config)

The device machine's image lists its packages in the tool library's KINDS.md ("Python packages
already there"); tools/device_image_packages.txt is that list, one name per line.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
import yaml

from whichshot.offline.build import expand_platforms
from whichshot.wheel_requirements import (
    image_packages,
    lacking,
    needed,
    normalise,
    pins,
    report_resolution,
    target_environment,
)

GLIBCS = ("2_17", "2_24", "2_27", "2_28", "2_31", "2_34", "2_35", "2_39")
CARRY_PART_MIB = 64  # what one device call takes along (the device tool's limit)


def resolve(
    requirements: list[str], python_version: str, no_deps: bool = False, tags: list[str] | None = None
) -> list[dict]:
    """pip's resolution for the target (a dry run: nothing is downloaded but metadata)."""
    if tags is None:
        tags = [f"manylinux_{glibc}_x86_64" for glibc in GLIBCS] + ["manylinux2014_x86_64", "linux_x86_64"]
    platforms = [arg for tag in tags for arg in ("--platform", tag)]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        argv = [sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed",
                "--report", str(report), "--python-version", python_version, *platforms,
                "--only-binary=:all:", "--target", str(Path(tmp) / "target"), *requirements]  # fmt: skip
        subprocess.run(argv + (["--no-deps"] if no_deps else []), check=True)
        return json.loads(report.read_text())["install"]


def torch_pin(package: str, version: str, python_version: str) -> list[str]:
    (item,) = resolve([f"{package}=={version}"], python_version, no_deps=True)
    requires = item["metadata"].get("requires_dist", [])
    return [r for r in requires if requirement_name(r) in ("torch", "flashinfer-python")]


def requirement_name(requirement: str) -> str:
    return normalise(re.split(r"[ ;<>=!~\[]", requirement)[0])


def file_size(name: str, filename: str) -> int:
    json_index = {"Accept": "application/vnd.pypi.simple.v1+json"}
    index = requests.get(f"https://pypi.org/simple/{name}/", headers=json_index, timeout=60)
    index.raise_for_status()
    return next(f["size"] for f in index.json()["files"] if f["filename"] == filename)


def to_carry(requirement: str, have: set[str], skip: set[str], python_version: str) -> list[tuple[str, int]]:
    """(wheel file, bytes) of every distribution the target lacks. The requirement's own pins of the
    skipped names are dropped first: the target keeps its own (pip would otherwise replace them)."""
    (top,) = resolve([requirement], python_version, no_deps=True)
    deps = [r for r in top["metadata"].get("requires_dist", []) if "extra ==" not in r]
    deps = [r for r in deps if requirement_name(r) not in skip]
    wheels = [top] + resolve(deps, python_version)
    lacking = [w for w in wheels if normalise(w["metadata"]["name"]) not in have]
    files = [(normalise(w["metadata"]["name"]), w["download_info"]["url"].rsplit("/", 1)[1]) for w in lacking]
    with ThreadPoolExecutor(16) as pool:
        sizes = list(pool.map(lambda item: file_size(*item), files))
    return sorted(zip([f for _, f in files], sizes, strict=True), key=lambda item: -item[1])


def hashed_pins(
    requirement: str, also: list[str], have: set[str], skip: set[str], python_version: str, platform: str
) -> dict:
    """The wheel's sha256 and the pins of what it and `also` need that the image lacks, `also` included
    (one resolution, the bundle's platform tags, so the sha256s are of the wheels the bundle downloads)."""
    tags = expand_platforms([platform])
    listed = resolve([requirement, *also], python_version, no_deps=True, tags=tags)
    (top,) = [item for item in listed if normalise(item["metadata"]["name"]) == requirement_name(requirement)]
    others = [item for item in listed if item is not top]
    environment = target_environment(python_version)
    requires = top["metadata"].get("requires_dist", []) + also
    direct = [r for r in requires if set(needed([r], environment, frozenset())) - have - skip]
    resolved = report_resolution({"install": [top, *others, *resolve(direct, python_version, tags=tags)]})
    name = normalise(top["metadata"]["name"])
    extra = [normalise(item["metadata"]["name"]) for item in others]
    missing = sorted({*lacking([name, *extra], resolved, have, environment, frozenset(skip)), *extra})
    return {"sha256": resolved[name]["sha256"], "requirements": pins(missing, resolved),
            "files": [resolved[m]["file"] for m in missing]}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    pins = sub.add_parser("torch-pins")
    pins.add_argument("package")
    pins.add_argument("versions", nargs="+")
    size = sub.add_parser("size")
    size.add_argument("requirement")
    size.add_argument("--have", type=Path, required=True)
    size.add_argument("--skip", nargs="*", default=["torch", "torchvision", "torchaudio"])
    hashed = sub.add_parser("pins")
    hashed.add_argument("requirement")
    hashed.add_argument("--have", type=Path, required=True)
    hashed.add_argument("--skip", nargs="*", default=[])
    hashed.add_argument("--with", dest="also", nargs="*", default=[], help="further requirements (gguf)")
    hashed.add_argument("--platform", default="manylinux_2_31_x86_64")
    for command in (pins, size, hashed):
        command.add_argument("--python-version", default="3.12")
    args = parser.parse_args()
    if args.command == "torch-pins":
        for version in args.versions:
            print(args.package, version, torch_pin(args.package, version, args.python_version))
        return 0
    have = image_packages(args.have)
    if args.command == "pins":
        skip = {normalise(n) for n in args.skip}
        found = hashed_pins(args.requirement, args.also, have, skip, args.python_version, args.platform)
        with ThreadPoolExecutor(16) as pool:
            sizes = list(pool.map(lambda f: file_size(f[0]["pin"].split("==")[0], f[1]),
                                  zip(found["requirements"], found["files"], strict=True)))  # fmt: skip
        print(f"# {args.requirement}: {len(found['requirements'])} distributions the image lacks, "
              f"{sum(sizes) / 2**20:.1f} MiB of wheels beside its own")  # fmt: skip
        print(yaml.safe_dump({"sha256": found["sha256"], "requirements": found["requirements"]},
                             sort_keys=False, width=200), end="")  # fmt: skip
        return 0
    wheels = to_carry(args.requirement, have, {normalise(name) for name in args.skip}, args.python_version)
    total = sum(size for _, size in wheels)
    parts = -(-total // (CARRY_PART_MIB * 2**20))
    print(f"{args.requirement}: {len(wheels)} wheels the target lacks, {total / 2**20:.0f} MiB, "
          f"{parts} device calls of {CARRY_PART_MIB} MiB")  # fmt: skip
    for filename, size in wheels[:15]:
        print(f"  {size / 2**20:7.1f} MiB  {filename}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
