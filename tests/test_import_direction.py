"""Imports in whichshot point down the stages, never up (issue 34).

STAGES ranks every file of the package, lowest first: a file may import its own stage or a lower one.
The test reads the sources with `ast` and imports nothing (imports inside functions and relative imports
included). It fails on
- an import that points to a higher stage, unless ALLOWED_UP lists it;
- an import of a whichshot module inside a function, which hides a cycle or an upward arrow, unless
  ALLOWED_IN_FUNCTION lists it;
- a cycle between files, in-function imports included, unless ALLOWED_FILE_CYCLES lists it;
- an import of an engine kind (the top-level engines/) from whichshot, which knows kinds by name only;
- an allow-list entry that no longer occurs.
The lists hold today's exceptions and can only shrink. When a change fixes an import, delete its entry in
the same change; never add one. A new file needs its stage in STAGES (a folder entry covers its files).
"""

import ast
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STAGES: dict[str, tuple[str, ...]] = {  # lowest first; "x/" names a folder, the longest entry wins
    "base": ("whichshot/__init__.py", "whichshot/errors.py", "whichshot/hashing.py", "whichshot/atomic.py",
             "whichshot/cache.py", "whichshot/tables.py", "whichshot/schemas/", "whichshot/redact.py",
             "whichshot/keyed.py", "whichshot/snakemake_record.py",
             "whichshot/pypi.py", "whichshot/tell.py", "whichshot/wheel_requirements.py"),
    "shots": ("whichshot/shots/",),
    "machine": ("whichshot/telemetry/", "whichshot/host.py", "whichshot/cluster.py"),
    "engine protocol": ("whichshot/engine/", "whichshot/spec_modes.py"),
    "engine kinds": ("engines/",),  # the top-level folder: whichshot reaches a kind through the registry only
    "prepare": ("whichshot/prepare/",),
    "measure": ("whichshot/measure/",),
    "figures": ("whichshot/figures/",),
    "claims": ("whichshot/claims/",),
    "report": ("whichshot/report/",),
    "archive": ("whichshot/archive/",),
    "cli": ("whichshot/config.py", "whichshot/engine_config.py", "whichshot/entry.py", "whichshot/compare.py",
            "whichshot/estimate.py", "whichshot/offline/"),
}  # fmt: skip
STAGE_NAMES = list(STAGES)
RANK = {path: rank for rank, paths in enumerate(STAGES.values()) for path in paths}

# Today's exceptions, none left: (file, module it imports) pointing up; (file, module) imported inside a
# function; a set of files that import each other.
ALLOWED_UP: set[tuple[str, str]] = set()
ALLOWED_IN_FUNCTION: set[tuple[str, str]] = set()
ALLOWED_FILE_CYCLES: set[frozenset[str]] = set()


@dataclass(frozen=True)
class Import:
    file: str  # the importing file, "whichshot/engine/base.py"
    line: int
    target: str  # the module imported, "whichshot.engine.process"
    target_file: str  # its file, "whichshot/engine/process.py"
    function: str | None  # the function the import sits in; None at module level

    def __str__(self) -> str:
        return f"{self.file}:{self.line} -> {self.target}"


def module_name(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PACKAGES = ("whichshot", "engines")


def package_sources() -> dict[str, str]:
    paths = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))
    return {path.relative_to(ROOT).as_posix(): path.read_text() for path in paths}


def collect_imports(sources: dict[str, str]) -> list[Import]:
    files = {module_name(path): path for path in sources}
    found = []
    for path, text in sources.items():
        for node, function in walk(ast.parse(text)):
            for target in imported_modules(node, path, files):
                if target.split(".")[0] in PACKAGES:
                    target_file = files.get(target, f"{target} (no such file)")
                    found.append(Import(path, node.lineno, target, target_file, function))
    return found


def walk(node: ast.AST, function: str | None = None) -> Iterator[tuple[ast.AST, str | None]]:
    """Every node under `node`, with the name of the function it sits in."""
    for child in ast.iter_child_nodes(node):
        yield child, function
        inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
        yield from walk(child, inner)


def imported_modules(node: ast.AST, path: str, files: dict[str, str]) -> list[str]:
    """The modules an import statement runs: `from pkg import name` runs pkg.name when that is a module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = absolute_module(node, path)
    names = [f"{base}.{alias.name}" for alias in node.names]
    return list(dict.fromkeys(name if name in files else base for name in names))


def absolute_module(node: ast.ImportFrom, path: str) -> str:
    if not node.level:
        return node.module or ""
    package = module_name(path).split(".")[: None if path.endswith("__init__.py") else -1]
    return ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))


def stage_of(path: str) -> int:
    entries = [entry for entry in RANK if path == entry or (entry.endswith("/") and path.startswith(entry))]
    assert entries, f"{path} has no stage: add it to STAGES"
    return RANK[max(entries, key=len)]


Found = list[tuple[Hashable, str]]  # (the allow-list key, the message)


def upward_imports(imports: list[Import]) -> Found:
    found: Found = []
    for imp in imports:
        source, target = stage_of(imp.file), stage_of(imp.target_file)
        if target > source:
            arrow = f"{STAGE_NAMES[source]} -> {STAGE_NAMES[target]}"
            found.append(((imp.file, imp.target), f"{imp} points up the stages ({arrow})"))
    return found


def kind_imports(imports: list[Import]) -> list[str]:
    kinds = [imp for imp in imports if imp.file.startswith("whichshot/") and imp.target.startswith("engines")]
    return [f"{imp} imports an engine kind: reach it through whichshot.engine's registry" for imp in kinds]


def in_function_imports(imports: list[Import]) -> Found:
    inside = [imp for imp in imports if imp.function]
    return [((i.file, i.target), f"{i} inside {i.function}(): import it at the top") for i in inside]


def file_cycles(imports: list[Import]) -> Found:
    """The cycles of the file graph. Only written imports count, not the parent __init__ that each runs."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        graph.setdefault(imp.file, set()).add(imp.target_file)
    reach = {file: reachable(graph, file) for file in graph}
    on_cycles = [file for file in graph if file in reach[file]]
    cycles = {frozenset(other for other in reach[file] if file in reach.get(other, ())) for file in on_cycles}
    found: Found = []
    for cycle in sorted(cycles, key=sorted):
        arrows = [str(i) for i in imports if i.file in cycle and i.target_file in cycle]
        found.append((cycle, "file cycle:\n  " + "\n  ".join(arrows)))
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def ratchet(found: Found, allowed: set, list_name: str) -> list[str]:
    """What is found and not allowed, and what is allowed and no longer found."""
    new = [message for key, message in found if key not in allowed]
    stale = allowed - {key for key, _ in found}
    shown = [sorted(key) if isinstance(key, frozenset) else key for key in stale]
    return new + [f"{list_name} entry {key} no longer occurs: delete it" for key in sorted(shown)]


@cache
def package_imports() -> list[Import]:
    return collect_imports(package_sources())


def test_every_file_has_a_stage():
    for path in package_sources():
        stage_of(path)


def test_imports_point_down_the_stages():
    failures = ratchet(upward_imports(package_imports()), ALLOWED_UP, "ALLOWED_UP")
    assert not failures, "\n".join(failures)


def test_whichshot_imports_no_engine_kind():
    assert not kind_imports(package_imports())
    fake = collect_imports(
        {"engines/__init__.py": "", "engines/mine.py": "", "whichshot/x.py": "import engines.mine\n"}
    )
    assert kind_imports(fake) == [
        "whichshot/x.py:1 -> engines.mine imports an engine kind: reach it through "
        "whichshot.engine's registry"
    ]


def test_no_whichshot_import_inside_a_function():
    failures = ratchet(in_function_imports(package_imports()), ALLOWED_IN_FUNCTION, "ALLOWED_IN_FUNCTION")
    assert not failures, "\n".join(failures)


def test_no_file_cycle():
    failures = ratchet(file_cycles(package_imports()), ALLOWED_FILE_CYCLES, "ALLOWED_FILE_CYCLES")
    assert not failures, "\n".join(failures)


# The checker itself, on a tiny made-up package: each rule fires, and a stale allow-list entry fails.
FAKE = {
    "whichshot/__init__.py": "",
    "whichshot/errors.py": "",
    "whichshot/measure/__init__.py": "",
    "whichshot/measure/grid.py": "import whichshot.errors\nfrom whichshot.report import answer\n",
    "whichshot/report/__init__.py": "from . import summary\n",
    "whichshot/report/summary.py": "def render():\n    from .answer import block\n",
    "whichshot/report/answer.py": "from whichshot.report import summary\nfrom .. import errors\n",
}


def test_the_walker_resolves_packages_and_relative_imports():
    found = {(i.file, i.line, i.target, i.target_file, i.function) for i in collect_imports(FAKE)}
    assert found == {
        ("whichshot/measure/grid.py", 1, "whichshot.errors", "whichshot/errors.py", None),
        ("whichshot/measure/grid.py", 2, "whichshot.report.answer", "whichshot/report/answer.py", None),
        ("whichshot/report/__init__.py", 1, "whichshot.report.summary", "whichshot/report/summary.py", None),
        ("whichshot/report/summary.py", 2, "whichshot.report.answer", "whichshot/report/answer.py", "render"),
        ("whichshot/report/answer.py", 1, "whichshot.report.summary", "whichshot/report/summary.py", None),
        ("whichshot/report/answer.py", 2, "whichshot.errors", "whichshot/errors.py", None),
    }


def test_each_rule_fires_and_stale_entries_fail():
    imports = collect_imports(FAKE)
    up = ("whichshot/measure/grid.py", "whichshot.report.answer")
    assert ratchet(upward_imports(imports), set(), "UP") == [
        "whichshot/measure/grid.py:2 -> whichshot.report.answer points up the stages (measure -> report)"
    ]
    assert ratchet(in_function_imports(imports), set(), "IN") == [
        "whichshot/report/summary.py:2 -> whichshot.report.answer inside render(): import it at the top"
    ]
    assert ratchet(file_cycles(imports), set(), "CYCLES") == [
        "file cycle:\n  whichshot/report/summary.py:2 -> whichshot.report.answer"
        "\n  whichshot/report/answer.py:1 -> whichshot.report.summary"
    ]
    cycle = frozenset({"whichshot/report/summary.py", "whichshot/report/answer.py"})
    assert ratchet(file_cycles(imports), {cycle}, "CYCLES") == []
    gone = frozenset({"whichshot/report/answer.py", "whichshot/measure/grid.py"})
    assert ratchet(file_cycles(imports), {cycle, gone}, "CYCLES") == [
        f"CYCLES entry {sorted(gone)} no longer occurs: delete it"
    ]
    assert ratchet(upward_imports(imports), {up}, "UP") == []
    stale = ("whichshot/report/answer.py", "whichshot.measure.grid")
    assert ratchet(upward_imports(imports), {up, stale}, "UP") == [
        f"UP entry {stale} no longer occurs: delete it"
    ]
