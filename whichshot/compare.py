"""Compare two runs: python -m whichshot.compare RUN_A RUN_B [--out FILE.md]

Each headline figure's ratio B/A, matched by cell, and the measured factors it is attributed to
(whichshot.report.compare says the rule). RUN_* is a results dir or a committed reference dir
holding figures.parquet and shots.parquet."""

import argparse
from pathlib import Path

from whichshot.atomic import write_text_atomic
from whichshot.report.compare import compare_runs, load_run, render


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m whichshot.compare", description=__doc__.splitlines()[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--out", type=Path, help="also write the table to this Markdown file")
    args = parser.parse_args(argv)
    text = render(compare_runs(load_run(args.run_a), load_run(args.run_b)), str(args.run_a), str(args.run_b))
    print(text, end="")
    if args.out is not None:
        write_text_atomic(args.out, text)
    return text


if __name__ == "__main__":
    main()
