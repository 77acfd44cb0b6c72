"""Lint, types and layering are part of the test suite, so CI keeps them green."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PKG = REPO / "traceforge"

#: Which top-level modules and subpackages each may import (the architecture's downward
#: arrows: commands -> render -> report -> analyzers -> formats | capture -> model). The
#: package root (``__init__``: the public API, resolved lazily) sits on top with the CLI.
ALLOWED = {
    # Strings capture writes and the step reader recognizes (a leaf, for the capture
    # wrapper inside the profiled process).
    "step_marks": set(),
    # How a trace's args are handed over (the model holds a provider; readers make them).
    "args_provider": set(),
    # DataFrames whose columns stay as given (object strings, arrays not copied).
    "frames": set(),
    # The values of the kind column (a leaf: the reader's column passes run in processes
    # forked before pandas is imported; model re-exports them).
    "kinds": set(),
    # Sort orders of several int keys (a leaf, numpy only: model re-exports it).
    "ordering": set(),
    # Pairs of int ids as one key (a leaf, numpy and pandas: model re-exports it).
    "pairs": set(),
    "model": {"args_provider", "kinds", "ordering", "pairs"},
    "errors": set(),
    "samples": set(),
    "executables": set(),
    "version": set(),
    # The run's step time, profiler overhead and outlier rule (reads capture summaries).
    "step_time": set(),
    # Work a command leaves running on a thread beside it (a new cache entry's write),
    # waited for at its end (a leaf: the CLI imports it before it knows the verb).
    "background": set(),
    # Work done in forked children (the reader's chunks, the report's critical path, the
    # critical path's steps on the available cores); none while background work runs.
    "forks": {"background"},
    # The C library's calls Python lacks (sync_file_range, mallopt), through ctypes.
    "libc": set(),
    # Output files replaced whole or not at all (every layer that writes uses it).
    "outputs": {"libc"},
    "formats": {"model", "errors", "samples", "executables", "forks", "args_provider",
                "background", "kinds"},
    "capture": {"model", "errors", "executables", "step_marks", "outputs", "step_time"},
    # Many-rank runs: reads rank files (formats) on a process pool or Dask and runs the
    # per-rank summary a verb hands it; it never imports analyzers, whose split
    # functions stay pure (Trace -> summary, summaries -> result).
    "engine": {"model", "errors", "formats"},
    # Where a command's output file is checked and written (a leaf: render and the
    # commands write through it).
    "output_file": {"errors", "outputs"},
    # Runs named by path (trace files, rank folders, capture folders, sweeps) loaded
    # with their capture facts: the notebook API's load_runs and the multi-run verbs'.
    "run_loader": {"model", "errors", "analyzers", "capture", "formats"},
    # A PyTorch memory snapshot file read (formats) and analysed (analyzers.memory): the
    # notebook API's memory_snapshot and the memory verb's.
    "memory_snapshots": {"model", "errors", "analyzers", "formats"},
    "analyzers": {"model", "frames", "errors", "step_marks", "step_time", "forks"},
    "report": {"model", "frames", "errors", "analyzers", "forks", "step_time"},
    "render": {"model", "errors", "analyzers", "report", "formats", "outputs", "output_file",
               "step_time", "forks"},
    "ui": {"model", "errors", "analyzers", "report", "render", "formats", "outputs"},
    "commands": {"model", "errors", "analyzers", "report", "formats", "render", "capture",
                 "samples", "ui", "engine", "output_file", "run_loader", "memory_snapshots",
                 "__init__", "outputs", "step_time"},
    # The notebook verbs that return what the CLI shows (tf.info, tf.idle).
    "notebook": {"model", "errors", "analyzers", "formats"},
    # The CLI's memory guard (reads the one size syntax from formats.cache_settings).
    "limits": {"errors", "formats"},
    # (formats: the prefetch of a trace's chunks, started before the verb is imported)
    "cli": {"errors", "commands", "version", "limits", "background", "formats", "libc"},
    "__main__": {"cli"},
    "__init__": {"model", "errors", "samples", "formats", "capture", "analyzers", "report",
                 "render", "ui", "engine", "limits", "outputs", "run_loader",
                 "memory_snapshots", "notebook", "step_time"},
}
MODULES = {p.stem if p.is_file() else p.name for p in PKG.iterdir()
           if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())}


def _tool(name: str) -> str:
    exe = Path(sys.executable).with_name(name)
    found = str(exe) if exe.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} not installed")
    return found


def test_ruff_clean() -> None:
    r = subprocess.run([_tool("ruff"), "check", "traceforge", "tests", "benchmarks"],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_clean() -> None:
    import numpy as np

    if int(np.__version__.split(".")[0]) < 2:
        # numpy 1.x ships older stubs (bare ndarray is an error there): types are checked
        # once, against the newest releases (CI's first run); the lowest-versions run
        # checks behaviour.
        pytest.skip("types are checked against numpy 2 stubs")
    r = subprocess.run([_tool("mypy")], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def _layer(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0].removesuffix(".py") if rel.parts else ""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: Every module of the package, dotted (``traceforge.analyzers.timing.idle``).
DOTTED = {_module_name(p) for p in PKG.rglob("*.py")}


def _resolved(node: ast.AST, path: Path) -> list[str]:
    """The traceforge modules an import statement reaches, dotted: ``from a.b import c``
    is ``a.b.c`` where that is a module, else ``a.b``; relative imports are resolved
    against ``path``'s package."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "traceforge"]
    if not isinstance(node, ast.ImportFrom):
        return []
    module = node.module or ""
    if node.level:
        pkg = _module_name(path).split(".")
        if path.name != "__init__.py":
            pkg = pkg[:-1]
        base = pkg[: len(pkg) - (node.level - 1)]
        module = ".".join(base + ([module] if module else []))
    if module.split(".")[0] != "traceforge":
        return []
    return [f"{module}.{a.name}" if f"{module}.{a.name}" in DOTTED else module
            for a in node.names]


def _targets(node: ast.AST, path: Path) -> list[str]:
    """The top-level traceforge modules an import statement reaches: ``from traceforge.x
    import``, ``import traceforge.x``, ``from traceforge import x`` (x a module, else the
    root) and relative imports."""
    return [m.split(".")[1] if "." in m else "__init__" for m in _resolved(node, path)]


def test_every_module_has_a_layer() -> None:
    assert not MODULES - set(ALLOWED), sorted(MODULES - set(ALLOWED))


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_point_downward(path: Path) -> None:
    layer = _layer(path)
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        for target in _targets(node, path):
            # The version string is a leaf every layer may read.
            assert target in (layer, "version") or target in ALLOWED[layer], (
                f"{path.relative_to(REPO)} imports traceforge.{target}"
            )


def test_lowest_constraints_pin_every_base_dependency_at_its_floor() -> None:
    """CI's second run installs .ci/lowest.txt: it must pin each dependency to its floor,
    the base ones and those of the extras traceforge's own code imports (charts, dask,
    sql), which the test extra installs too, and pytest-xdist, which the test command
    uses."""
    tomllib = pytest.importorskip("tomllib")
    import re

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    deps = [*project["dependencies"], *extras["charts"], *extras["dask"], *extras["sql"],
            *[d for d in extras["test"] if d.startswith("pytest-xdist")]]
    floors = {}
    for d in deps:
        d = d.split(";")[0]  # an environment marker does not change the floor
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[a-z,]+\])?>=([0-9][0-9.]*)", d.replace(" ", ""))
        assert m, f"{d}: every dependency states a floor (NAME>=X)"
        floors[m.group(1).lower()] = m.group(3)
        if m.group(1).lower() == "dask":  # dask[distributed] asks for the same distributed
            floors["distributed"] = m.group(3)
    pins = {}
    for line in (REPO / ".ci" / "lowest.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip()
    assert set(pins) == set(floors)
    for name, floor in floors.items():
        pinned = tuple(int(x) for x in pins[name].split("."))
        stated = tuple(int(x) for x in floor.split("."))
        # The pin is the floor itself (zero-padded: pandas>=2.1 is pandas==2.1.0).
        assert pinned[: len(stated)] == stated and not any(pinned[len(stated):]), name


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run runs the README's test command, as written."""
    readme = (REPO / "README.md").read_text()
    command = next(line for line in readme.splitlines() if "python -m pytest" in line)
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    marker = next(i for i, line in enumerate(ci) if "README test command" in line)
    assert ci[marker + 1] == command


#: Inside analyzers/: which sub-package (or top-level module) may import which, bottom up.
#: ``names`` (kernel classes, C++ names) and ``timeline`` (the shared timeline model) at
#: the bottom, cost models on them, one trace's time analyses above, then the critical
#: path and the multi-run analyses. A new concern gets its own sub-package and a line here.
ANALYZERS = {
    "__init__": set(),
    "names": set(),
    "timeline": {"names"},
    "costs": {"names", "timeline"},
    # What the profiler did to the run: outlier steps, overhead notes (issue 24).
    "profiling": {"timeline"},
    "timing": {"names", "timeline", "costs", "profiling"},
    # Collectives: matching across ranks, sizes, bandwidth, link ceilings (device peaks).
    "communication": {"names", "timeline", "costs"},
    "critical_path": {"names", "timeline", "timing", "communication", "profiling"},
    "runs": {"names", "timeline", "costs", "timing", "communication", "memory"},
    "counters": {"names", "costs"},
    "memory": {"names", "timeline"},
}
ANALYZER_FILES = sorted((PKG / "analyzers").rglob("*.py"))


def _analyzers_part(name: str) -> str:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def test_every_analyzers_part_has_a_layer() -> None:
    parts = {_analyzers_part(_module_name(p)) for p in ANALYZER_FILES}
    assert parts <= set(ANALYZERS), sorted(parts - set(ANALYZERS))


@pytest.mark.parametrize("path", ANALYZER_FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_analyzers_import_downward(path: Path) -> None:
    part = _analyzers_part(_module_name(path))
    for node in ast.walk(ast.parse(path.read_text())):
        for target in _resolved(node, path):
            if target.startswith("traceforge.analyzers."):
                other = _analyzers_part(target)
                assert other == part or other in ANALYZERS[part], (
                    f"{path.relative_to(REPO)} imports {target}")


def test_only_the_cli_imports_commands() -> None:
    found = set()
    for path in PKG.rglob("*.py"):
        name = _module_name(path)
        if name == "traceforge.cli" or name.startswith("traceforge.commands"):
            continue
        text = path.read_text()
        imports = [t for node in ast.walk(ast.parse(text)) for t in _resolved(node, path)]
        if any(t.startswith("traceforge.commands") for t in imports) or (
                '"traceforge.commands' in text):
            found.add(name)
    assert found == set()


@pytest.mark.parametrize("path", sorted((PKG / "commands").glob("*.py")), ids=lambda p: p.name)
def test_no_command_imports_another(path: Path) -> None:
    """A verb's module (one listed in ``cli.COMMANDS``) is never imported by another module
    of commands/: what two verbs share lives in the library or in a helper module there
    (``options``, ``values``, ``tables``, ``engine``; ``capture_ncu``, capture's ncu glue)."""
    from traceforge.cli import COMMANDS

    for node in ast.walk(ast.parse(path.read_text())):
        for target in _resolved(node, path):
            parts = target.split(".")
            if parts[:2] == ["traceforge", "commands"] and len(parts) > 2:
                assert parts[2] not in COMMANDS or parts[2] == path.stem, (
                    f"commands/{path.name} imports {target}")


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_no_private_name_crosses_modules(path: Path) -> None:
    """``from traceforge.x import _name`` and ``module._name`` on an imported traceforge
    module: a name another module needs is public (a package's internal surface is its
    modules' public names; the package's ``__init__`` says what it exports)."""
    tree = ast.parse(path.read_text())
    modules: set[str] = set()  # local names bound to traceforge modules
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _resolved(node, path):
            for a in node.names:
                assert not (a.name.startswith("_") and not a.name.startswith("__")), (
                    f"{path.relative_to(REPO)} imports {a.name}")
                if any(t.endswith("." + a.name) for t in _resolved(node, path)):
                    modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names
                           if a.asname and a.name.split(".")[0] == "traceforge")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            raise AssertionError(f"{path.relative_to(REPO)} reads {node.value.id}.{node.attr}")


#: Import circles still open; the list only shrinks (issue 26 item 3 emptied it).
KNOWN_CYCLES: list[set[str]] = []


def test_no_import_cycles() -> None:
    """Over every import (lazy ones in functions included; ``if TYPE_CHECKING:`` blocks
    left out), module to module."""
    nx = pytest.importorskip("networkx")
    graph = nx.DiGraph()
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test)
                       for stmt in node.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if id(node) not in typing_only:
                for target in _resolved(node, path):
                    if target != _module_name(path):
                        graph.add_edge(_module_name(path), target)
    cycles = [set(c) for c in nx.simple_cycles(graph)]
    assert [c for c in cycles if c not in KNOWN_CYCLES] == []
    assert [c for c in KNOWN_CYCLES if c not in cycles] == [], "a circle closed: drop it here"
