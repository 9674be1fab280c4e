"""Every number the README, the docs or a reference run's NOTES.md states must be one the pipeline (or a
committed command) printed: a figure, a shot's measured value, or a number in a committed output file.
This lists the ones no committed output holds.

Usage: python tools/check_numbers.py [FILE.md ...]   (default: README.md, every docs/*.md and every
NOTES.md under results/reference). Exit 1 if a number is unsupported.

A NOTES.md is checked against its own run directory: the values of figures.parquet (at the
precision the note writes them, also as percentages), and every number in the run's other
committed text files (config.yaml, report/summary.md, JSON, CSV). In README.md and docs/*.md (any
file but a NOTES.md) a paragraph that names reference runs (results/reference/...) is checked
against those runs; any other paragraph against the config profiles (config/*.yaml), the config
schema's defaults and the constants of whichshot/figures/constants.py. Numbers inside `code` or
fenced blocks (commands, settings) are not claims and are skipped, as are dates, clock times,
versions, and numbers that are part of a name (H200, sm_90, Q4_1, 8B, 135M).
"""

import functools
import math
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "results" / "reference"
DOCS = REPO / "docs"
# A number as prose writes it: 1,895 or 2.93 or 14 (a sign or a leading ~ is not part of it).
NUMBER = re.compile(r"(?<![\w.\-/@#])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w]|\.\d|-[A-Za-z])")
SKIP = re.compile(
    r"`[^`]*`"  # inline code
    r"|\d{4}-\d{2}-\d{2}"  # dates
    r"|\b\d{1,2}:\d{2}(?::\d{2})?\b"  # clock times
    r"|\b\d+\.\d+\.\d+\S*"  # versions
    r"|\b(?:v|Python |python|g\+\+ |CMake >= |==|#)\d[\w.]*"  # named versions, issue numbers
    r"|\bseed \d+"  # the seed articles' numbers name them
    r"|\]\([^)]*\)"  # link targets
)
TIMES = re.compile(r"(\d)[x×](?![\w])")  # 2.93x, 3×: a ratio, written onto its number
RANGE = re.compile(r"(\d)[-–](\d)")  # 20-25: two numbers
CONSTANTS = REPO / "whichshot" / "figures" / "constants.py"
DEFAULTS = REPO / "whichshot" / "schemas" / "config.schema.yaml"
CLAIMS = REPO / "claims"
TEXT_SUFFIXES = {".yaml", ".yml", ".json", ".csv", ".tsv", ".log", ".md", ".txt", ".toml"}


def claims(markdown: str) -> list[tuple[int, str, str]]:
    """(line number, number as written, its paragraph) of every number the prose states."""
    found, fenced = [], False
    paragraphs = _paragraph_of_lines(markdown)
    for number, line in enumerate(markdown.splitlines(), start=1):
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        prose = RANGE.sub(r"\1 to \2", TIMES.sub(r"\1 x", SKIP.sub(" ", line)))
        found += [(number, match.group(0), paragraphs[number]) for match in NUMBER.finditer(prose)]
    return found


def _paragraph_of_lines(markdown: str) -> dict[int, str]:
    """Each line's paragraph (lines up to the next blank line or heading)."""
    lines = markdown.splitlines()
    owner, start = {}, 0
    for index in range(len(lines) + 1):
        if index == len(lines) or not lines[index].strip() or lines[index].startswith("#"):
            text = "\n".join(lines[start : index + 1])
            for line in range(start, index + 1):
                owner[line + 1] = text
            start = index + 1
    return owner


def supported(written: str, printed: set[float]) -> bool:
    """The written number equals some printed value rounded to the written precision (the prose's
    sign is not part of the number, so a printed -5.9 supports a written "-5.9 %")."""
    decimals = len(written.partition(".")[2])
    value = float(written.replace(",", ""))
    tolerance = 0.5 * 10**-decimals + 1e-9
    return any(abs(abs(p) - value) <= tolerance for p in printed)


def printed_by(paths: Iterable[Path]) -> set[float]:
    """Every number in these outputs: figure values (also ×100 and as ratios' percent), and the
    numbers in committed text files."""
    values: set[float] = set()
    for path in paths:
        if path == CONSTANTS:  # the constants our judgments rest on (assumed figures of every run)
            values.update(c.value for c in constant_rows())
            values.update(c.value * 100 for c in constant_rows())
        elif path == DEFAULTS:  # the config schema's defaults
            values.update(schema_defaults(yaml.safe_load(DEFAULTS.read_text())))
        elif path.name == "figures.parquet":
            for value in pd.read_parquet(path)["value"].dropna():
                values.update({float(value), float(value) * 100, (float(value) - 1) * 100})
        elif path.name == "shots.parquet":  # one shot's measured value, as the table holds it
            shots = pd.read_parquet(path)
            for column in [c for c in shots if c in _value_columns()]:
                values.update(float(v) for v in pd.to_numeric(shots[column], errors="coerce").dropna())
        elif path.name == "claims.parquet":  # the claims, their verdicts' words and the status counts
            verdicts = pd.read_parquet(path)
            values.update(float(v) for v in verdicts["claimed"].dropna())
            values.update(float(n) for n in verdicts["status"].value_counts())
            values.add(float(len(verdicts)))
            for text in [*verdicts["verdict"].dropna(), *verdicts["quote"].dropna()]:
                values.update(_numbers(text))
        elif path.suffix in TEXT_SUFFIXES and path.name != "NOTES.md":
            values.update(_numbers(path.read_text(encoding="utf-8", errors="replace")))
    return {v for v in values if math.isfinite(v)}


def _numbers(text: str) -> list[float]:
    return [float(m.replace(",", "")) for m in re.findall(r"\d[\d,]*(?:\.\d+)?", text)]


def schema_defaults(node) -> list[float]:
    """Every number a schema gives as a default, at any depth."""
    found: list[float] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "default":
                found += [v for v in (value if isinstance(value, list) else [value])
                          if isinstance(v, int | float) and not isinstance(v, bool)]  # fmt: skip
            else:
                found += schema_defaults(value)
    elif isinstance(node, list):
        for item in node:
            found += schema_defaults(item)
    return found


def constant_rows():
    sys.path.insert(0, str(REPO))
    from whichshot.figures.constants import CONSTANTS as rows

    return rows


@functools.cache
def _value_columns() -> set[str]:
    properties = yaml.safe_load((REPO / "whichshot" / "schemas" / "shots.schema.yaml").read_text())[
        "properties"
    ]
    return {name for name, prop in properties.items() if "x-kind" in prop}


def run_outputs(run: Path) -> list[Path]:
    return [p for p in run.rglob("*") if p.is_file()]


RUN_NAMED = re.compile(r"results/reference/([\w/]+?)/?(?=[`\s).,:;]|$)")


def sources_for(markdown: Path, paragraph: str) -> list[Path]:
    if markdown.name == "NOTES.md":  # the run's outputs, and the claims files the seeds' numbers are in
        return [*run_outputs(markdown.parent), *sorted(CLAIMS.glob("*.yaml"))]
    named = [REFERENCE / n for n in RUN_NAMED.findall(paragraph) if (REFERENCE / n).is_dir()]
    if named:
        return [p for run in named for p in run_outputs(run)]
    return [*(REPO / "config").glob("*.yaml"), DEFAULTS, CONSTANTS]


def unsupported(markdown: Path) -> list[str]:
    text = markdown.read_text(encoding="utf-8")
    problems, cache = [], {}
    for line, written, paragraph in claims(text):
        key = tuple(sources_for(markdown, paragraph))
        if key not in cache:
            cache[key] = printed_by(key)
        if not supported(written, cache[key]):
            problems.append(f"{markdown.relative_to(REPO)}:{line}: {written}")
    return problems


def default_files() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.glob("*.md")), *sorted(REFERENCE.rglob("NOTES.md"))]


def main(argv: list[str]) -> int:
    files = [Path(a).resolve() for a in argv] or default_files()
    problems = [p for f in files for p in unsupported(f)]
    for problem in problems:
        print(problem)
    print(f"{len(problems)} number(s) no committed output holds, in {len(files)} file(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
