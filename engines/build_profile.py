"""Where an engine build's time went: the steps of a Ninja build, read from its .ninja_log.

The log is a header line ("# ninja log v5", v6 or v7) and one tab-separated line per output:
start and end in milliseconds since that ninja run began, the output's mtime, its path, and the
hash of the command that made it. An output can be listed more than once (a rebuild, a restat
appended to the same log): the last line for an output is the one that stands. The outputs of
one step with several outputs share one line each with the same times and command hash; such a
step is counted once.
"""

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NINJA_LOG_VERSIONS = ("5", "6", "7")
# The slowest objects build.json names; the full table goes into build_profile.tsv.
SLOWEST_OBJECTS = 15
TSV_HEADER = ("output", "target", "kind", "start_s", "end_s", "seconds")


class NinjaLogError(ValueError):
    """A .ninja_log this parser cannot read (not a ninja log, or a version it does not know)."""


@dataclass(frozen=True)
class Step:
    """One output of the build: when ninja started and finished the command that made it."""

    output: str
    start_ms: int
    end_ms: int
    command_hash: str

    @property
    def seconds(self) -> float:
        return (self.end_ms - self.start_ms) / 1000

    @property
    def target(self) -> str | None:
        """The CMake target an object file belongs to (the CMakeFiles/<target>.dir/ component)."""
        parts = self.output.split("/")
        for i, part in enumerate(parts[:-1]):
            if part == "CMakeFiles" and i + 1 < len(parts) - 1 and parts[i + 1].endswith(".dir"):
                return parts[i + 1].removesuffix(".dir")
        return None

    @property
    def kind(self) -> str:
        """compile (an object file of a target), link (an executable or library), other."""
        if self.target is not None and self.output.endswith((".o", ".obj")):
            return "compile"
        name = self.output.rsplit("/", 1)[-1]
        if self.output.startswith("bin/") or name.endswith((".a", ".so", ".lib", ".dll", ".dylib")):
            return "link"
        return "other"


def parse_ninja_log(text: str) -> list[Step]:
    """The log's steps, one per output (the last entry for an output wins), in the order of their
    last entries."""
    lines = text.splitlines()
    header = lines[0].strip() if lines else ""
    version = header.removeprefix("# ninja log v")
    if not header.startswith("# ninja log v") or version not in NINJA_LOG_VERSIONS:
        raise NinjaLogError(f"not a ninja log of version {'/'.join(NINJA_LOG_VERSIONS)}: {header[:60]!r}")
    steps: dict[str, Step] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 5:
            raise NinjaLogError(f"ninja log line {number} has {len(fields)} fields, not 5: {line[:80]!r}")
        start, end, _mtime, output, command_hash = fields
        try:
            step = Step(output, int(start), int(end), command_hash)
        except ValueError:
            raise NinjaLogError(f"ninja log line {number} has non-integer times: {line[:80]!r}") from None
        steps.pop(output, None)  # re-inserted: the order is that of the last entries
        steps[output] = step
    return list(steps.values())


def summarize(steps: list[Step], generator: str, jobs: int, wall_s: float) -> dict[str, Any]:
    """build.json's profile: the build step's wall seconds, the seconds of compiling per target
    (summed over its objects), link and other steps, and the slowest objects."""
    targets: dict[str, dict[str, Any]] = {}
    objects = [step for step in steps if step.kind == "compile"]
    for step in objects:
        entry = targets.setdefault(step.target, {"compile_s": 0.0, "objects": 0})
        entry["compile_s"] += step.seconds
        entry["objects"] += 1
    for entry in targets.values():
        entry["compile_s"] = round(entry["compile_s"], 1)
    commands = _one_per_command(steps)
    link_s = sum(step.seconds for step in commands if step.kind == "link")
    other_s = sum(step.seconds for step in commands if step.kind == "other")
    steps_s = sum(step.seconds for step in commands)
    slowest = sorted(objects, key=lambda step: (-step.seconds, step.output))[:SLOWEST_OBJECTS]
    return {
        "generator": generator,
        "jobs": jobs,
        "wall_s": round(wall_s, 1),
        "steps": len(commands),
        "steps_s": round(steps_s, 1),  # the steps' seconds added up: wall_s times the mean parallelism
        "compile_s": round(sum(step.seconds for step in objects), 1),
        "link_s": round(link_s, 1),
        "other_s": round(other_s, 1),
        "targets": dict(sorted(targets.items(), key=lambda item: (-item[1]["compile_s"], item[0]))),
        "slowest_objects": [[step.output, round(step.seconds, 1)] for step in slowest],
    }


def _one_per_command(steps: list[Step]) -> list[Step]:
    """One step per command run: the outputs of a step with several share its times and hash."""
    seen: set[tuple[int, int, str]] = set()
    unique = []
    for step in steps:
        key = (step.start_ms, step.end_ms, step.command_hash)
        if key not in seen:
            seen.add(key)
            unique.append(step)
    return unique


def profile_table(steps: list[Step]) -> str:
    """build_profile.tsv: every output, slowest first."""
    rows = ["\t".join(TSV_HEADER)]
    for step in sorted(steps, key=lambda step: (-step.seconds, step.output)):
        times = (f"{step.start_ms / 1000:.3f}", f"{step.end_ms / 1000:.3f}", f"{step.seconds:.3f}")
        rows.append("\t".join((step.output, step.target or "", step.kind, *times)))
    return "\n".join(rows) + "\n"


def ninja_program() -> str | None:
    """The ninja to build with: the pinned `ninja` package's (a dependency of whichshot), else one on
    PATH; None where there is none (the build then uses CMake's default generator, unprofiled)."""
    try:
        import ninja  # a dependency, yet optional here: a bare checkout may run without it

        packaged = Path(ninja.BIN_DIR) / "ninja" if ninja.BIN_DIR else None
        if packaged is not None and packaged.is_file():
            return str(packaged)
    except ImportError:
        pass
    return shutil.which("ninja")
