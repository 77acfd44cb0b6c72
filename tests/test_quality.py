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
    "model": set(),
    "errors": set(),
    "samples": set(),
    "executables": set(),
    "version": set(),
    # The run's step time, profiler overhead and outlier rule (reads capture summaries).
    "step_time": set(),
    # Work done in forked children (the reader's chunks, the report's critical path).
    "forks": set(),
    "formats": {"model", "errors", "samples", "executables", "forks"},
    "capture": {"model", "errors", "executables", "step_time"},
    # Many-rank runs: reads rank files (formats) on a process pool or Dask and runs the
    # per-rank summary a verb hands it; it never imports analyzers, whose split
    # functions stay pure (Trace -> summary, summaries -> result).
    "engine": {"model", "errors", "formats"},
    "analyzers": {"model", "errors", "step_time"},
    "report": {"model", "errors", "analyzers", "forks", "step_time"},
    "render": {"model", "errors", "analyzers", "report", "formats", "step_time"},
    "ui": {"model", "errors", "analyzers", "report", "render", "formats"},
    "commands": {"model", "errors", "analyzers", "report", "formats", "render", "capture",
                 "samples", "ui", "engine", "__init__", "step_time"},
    "cli": {"errors", "commands", "version"},
    "__main__": {"cli"},
    "__init__": {"model", "errors", "samples", "formats", "capture", "analyzers", "report",
                 "render", "ui", "commands", "cli", "engine", "step_time"},
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


def _targets(node: ast.AST) -> list[str]:
    """The traceforge modules an import statement reaches: ``from traceforge.x import``,
    ``import traceforge.x``, and ``from traceforge import x`` (x a module, else the root)."""
    if isinstance(node, ast.ImportFrom) and node.module:
        if node.module == "traceforge":
            return [a.name if a.name in MODULES else "__init__" for a in node.names]
        if node.module.startswith("traceforge."):
            return [node.module.split(".")[1]]
    if isinstance(node, ast.Import):
        return [a.name.split(".")[1] if "." in a.name else "__init__"
                for a in node.names if a.name.split(".")[0] == "traceforge"]
    return []


def test_every_module_has_a_layer() -> None:
    assert not MODULES - set(ALLOWED), sorted(MODULES - set(ALLOWED))


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_point_downward(path: Path) -> None:
    layer = _layer(path)
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        for target in _targets(node):
            # The version string is a leaf every layer may read.
            assert target in (layer, "version") or target in ALLOWED[layer], (
                f"{path.relative_to(REPO)} imports traceforge.{target}"
            )


def test_lowest_constraints_pin_every_base_dependency_at_its_floor() -> None:
    """CI's second run installs .ci/lowest.txt: it must pin each dependency to its floor,
    the base ones and those of the extras traceforge's own code imports (charts, dask,
    sql), which the test extra installs too."""
    tomllib = pytest.importorskip("tomllib")
    import re

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    deps = [*project["dependencies"], *extras["charts"], *extras["dask"], *extras["sql"]]
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
