"""Tests never touch the user's home or real cache; CI's HTA oracle runs where it can
(issue 25, item 15)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REAL_HOME, REPO, REQUIRE_HTA, hta_module


def test_home_is_a_temporary_folder() -> None:
    assert Path.home() != REAL_HOME
    assert "pytest" in str(Path.home())


def test_the_default_cache_lies_in_the_temporary_home(monkeypatch: pytest.MonkeyPatch) -> None:
    from traceforge.formats import cache, load

    monkeypatch.delenv("TRACEFORGE_CACHE", raising=False)
    where = cache.cache_dir()
    assert where.is_relative_to(Path.home()) and not where.is_relative_to(REAL_HOME)
    load(FIXTURES / "compiled.pt.trace.json.gz")
    assert any(where.rglob("*")), "the load wrote no cache entry where it should"


def test_hta_skip_fails_where_ci_requires_the_oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_HTA, "1")
    with pytest.raises(pytest.fail.Exception, match="cannot run"):
        hta_module("no_such_hta_module_here")
    monkeypatch.delenv(REQUIRE_HTA)
    with pytest.raises(pytest.skip.Exception):
        hta_module("no_such_hta_module_here")


def test_ci_lowest_venv_runs_the_hta_oracle() -> None:
    run = (REPO / ".ci" / "run").read_text()
    lowest = run[run.index(".venv-lowest"):]
    assert re.search(rf"^{REQUIRE_HTA}=1 python -m pytest", lowest, flags=re.M)
    assert "[test,hta]" in lowest
    pins = dict(line.split("==") for line in (REPO / ".ci" / "lowest.txt").read_text().split())
    assert int(pins["pandas"].split(".")[0]) < 3  # HTA 0.5.0 works there (HTA#318)
