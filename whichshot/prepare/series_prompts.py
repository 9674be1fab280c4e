"""A series' own prompts: the entries of its model's prompts file that the series sends, in a file
named by their content.

A series' job depends on that file alone, never on the prompts file of its model (which holds every
length and workload, and is rewritten whenever one of them changes): a rebuilt prompts file whose
entries for a series are as they were leaves that series' file, and so its measurement, alone, and
an entry that changed gets a file of another name, so exactly the series that send it measure again
(docs/protocol.md, "What re-measures what")."""

import functools
import json
from pathlib import Path
from typing import Any

from whichshot.atomic import write_json_atomic
from whichshot.errors import WhichshotError
from whichshot.hashing import canonical_json, sha256_text
from whichshot.snakemake_record import record_of

# Where a series' entries lie in a prompts file: the grid's variants of one length (build_prompts'
# "prompts"), one workload's prompt ("workloads"), one request of a trace (build_trace_prompts').
GRID, WORKLOAD, TRACE_REQUEST = "prompts", "workloads", "requests"
SECTIONS = (GRID, WORKLOAD, TRACE_REQUEST)
CONTENT_ID_CHARS = 16  # of the entries' sha256: their file's name says which content it holds


def series_prompts(prompts: dict[str, Any], section: str, key: str) -> dict[str, Any]:
    """The part of a prompts file one series sends, shaped as the prompts file (a series of the
    grid keeps the corpus it was cut from; a workload or trace request keeps its own source)."""
    try:
        if section == GRID:
            variants = {name: p for name, p in prompts[GRID].items() if p["prompt_tokens"] == int(key)}
            if not variants:
                raise KeyError(key)
            about = {name: value for name, value in prompts.items() if name not in (GRID, WORKLOAD)}
            return {**about, GRID: variants}
        if section == WORKLOAD:
            return {WORKLOAD: {key: prompts[WORKLOAD][key]}}
        if section == TRACE_REQUEST:
            traces = prompts["traces"]
            return {"traces": {name: {**trace, "requests": {key: trace["requests"][key]}}
                               for name, trace in traces.items()}}  # fmt: skip
    except KeyError:
        raise WhichshotError(f"the prompts file holds no {section} entry {key!r}") from None
    raise ValueError(f"unknown section {section!r} (one of {SECTIONS})")


def content_id(entries: dict[str, Any]) -> str:
    """What names a series' prompts file: the start of the sha256 of its canonical JSON."""
    return sha256_text(canonical_json(entries))[:CONTENT_ID_CHARS]


def series_prompts_path(prompts_path: Path, section: str, key: str) -> Path:
    """Where the series' own prompts lie, named by their content: beside the prompts file, in a
    folder of its name."""
    entries = series_prompts(_parsed(prompts_path.read_text()), section, key)
    return prompts_path.with_suffix("") / f"{section}-{key}.{content_id(entries)}.json"


def write_series_prompts(prompts_path: Path, out_path: Path) -> None:
    """Write the entries `out_path` names (by series_prompts_path) from the prompts file, if it
    still holds them."""
    unit, named_id = out_path.name.removesuffix(".json").rsplit(".", 1)
    section, key = unit.split("-", 1)
    entries = series_prompts(json.loads(prompts_path.read_text()), section, key)
    if content_id(entries) != named_id:
        raise WhichshotError(
            f"{prompts_path} no longer holds the prompts {out_path.name} names (its {unit} is "
            f"{content_id(entries)} now); run the workflow again to plan with the new ones"
        )
    write_json_atomic(out_path, entries)


@functools.lru_cache(maxsize=4)
def _parsed(text: str) -> dict[str, Any]:
    """A prompts file's contents, parsed once: every series of a model reads it as the DAG is made
    (keyed by the text itself, so a file rewritten in the same clock tick is never read stale)."""
    return json.loads(text)


def unrecorded_stale(needed: dict[Path, list[tuple[str, str]]], metadata_dir: Path) -> str | None:
    """One line naming a prompts file that lacks an entry a series needs and that Snakemake will not
    rebuild because its record in metadata_dir (.snakemake/metadata) is gone (a changed prompt
    length is a rerun trigger only through that record); None where there is none. needed: each
    prompts file and the (section, key) entries its series send."""
    for path, entries in sorted(needed.items()):
        if not path.is_file() or record_of(path, metadata_dir) is not None:
            continue
        try:
            held = _parsed(path.read_text())
            for section, key in entries:
                series_prompts(held, section, key)
        except (WhichshotError, ValueError) as missing:
            return (
                f"{path} was made for other settings ({missing}) and Snakemake has no record of it "
                f"in {metadata_dir} to rebuild it by: delete {path} and run again"
            )
    return None
