"""What carrying a Python package to a machine without a package index costs: the wheels its
requirements resolve to for the target's Python and platform, less the distributions the target
already has, with their sizes from PyPI (needs the network here, not there).

Usage:
  python tools/carry_size.py torch-pins vllm 0.23.0 0.25.1 0.27.1
      which torch each release pins (a compiled package needs the target's own torch)
  python tools/carry_size.py size vllm==0.25.1 --have tools/device_image_packages.txt [--skip torch ...]
      the wheels to carry for cp312 manylinux x86_64 and their total size, largest first

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

GLIBCS = ("2_17", "2_24", "2_27", "2_28", "2_31", "2_34", "2_35", "2_39")
CARRY_PART_MIB = 64  # what one device call takes along (the device tool's limit)


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def resolve(requirements: list[str], python_version: str, no_deps: bool = False) -> list[dict]:
    """pip's resolution for the target (a dry run: nothing is downloaded but metadata)."""
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
    for command in (pins, size):
        command.add_argument("--python-version", default="3.12")
    args = parser.parse_args()
    if args.command == "torch-pins":
        for version in args.versions:
            print(args.package, version, torch_pin(args.package, version, args.python_version))
        return 0
    lines = [line.strip() for line in args.have.read_text().splitlines()]
    have = {normalise(line) for line in lines if line and not line.startswith("#")}
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
