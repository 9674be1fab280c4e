"""How long a config's grid will take, before it runs (whichshot.measure.estimate says how):

python -m whichshot.estimate --configfile config/full.yaml
"""

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from whichshot.config import check_config
from whichshot.measure.estimate import DEFAULT_SHOTS, estimate_words


def load_config(path: Path) -> dict[str, Any]:
    """A config file with the schema's defaults, checked as the workflow checks it."""
    return check_config(yaml.safe_load(Path(path).read_text(encoding="utf-8")))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="How long each config's grid will take, before it runs.")
    parser.add_argument("--configfile", type=Path, action="append", required=True)
    parser.add_argument(
        "--shots", type=Path, default=DEFAULT_SHOTS, help="earlier results to take speeds from"
    )
    args = parser.parse_args(argv)
    for path in args.configfile:
        print(estimate_words(load_config(path), args.shots))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
