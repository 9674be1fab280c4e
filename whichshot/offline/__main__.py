"""python -m whichshot.offline build|install: see docs/offline.md."""

import argparse
import sys
from pathlib import Path

from whichshot.errors import WhichshotError
from whichshot.offline import installer
from whichshot.offline.build import REPO, build_bundle, format_summary, this_machine_platform


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m whichshot.offline", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="write a bundle (needs the network)")
    build.add_argument("--config", action="append", required=True, type=Path, help="a config to run offline")
    build.add_argument(
        "--python-version",
        default=f"{sys.version_info.major}.{sys.version_info.minor}",
        help="the target's Python, e.g. 3.12 (default: this one)",
    )
    build.add_argument(
        "--platform",
        action="append",
        dest="platforms",
        help="the target's wheel platform, e.g. manylinux_2_28_x86_64 (repeatable; "
        "default: this machine's); older manylinux tags are implied",
    )
    build.add_argument("--extra", action="append", default=[], dest="extras", help="a pyproject extra")
    build.add_argument("--without-models", action="store_true", help="leave the model files out")
    checkout = "the git checkout to bundle (default: the one this package runs from)"
    build.add_argument("--source", type=Path, default=REPO, help=checkout)
    build.add_argument("-o", "--output", required=True, type=Path, help="a new folder, or a .tar file")
    install = commands.add_parser("install", help="install a bundle here (no network)")
    installer.add_arguments(install)
    install.add_argument("bundle", help="the bundle folder or .tar")
    args = parser.parse_args(argv)
    if args.command == "install":
        try:
            installer.install(Path(args.bundle), Path(args.venv), installer.cache_dir(args.cache), args.cores)
        except installer.BundleError as exc:
            print(f"install: {exc}", file=sys.stderr)
            return 1
        return 0
    try:
        summary = build_bundle(
            args.config,
            args.output,
            args.python_version,
            args.platforms or [this_machine_platform()],
            args.extras,
            with_models=not args.without_models,
            source_root=args.source,
        )
    except WhichshotError as exc:
        print(f"build: {exc}", file=sys.stderr)
        return 1
    print(format_summary(args.output, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
