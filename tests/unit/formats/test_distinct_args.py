"""Trace.distinct_args: the factorized args the FLOPs model reads, against whole dicts.

Every provider must give, row for row, the same values as ``Trace.args`` reduced to the
keys: the Kineto reader's raw-bytes grouping (fresh and cached), the demangler's wrapper
and the generic path of any other provider.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import FIXTURES, SHARED, ev, make_trace
from traceforge import load
from traceforge.analyzers.costs.flops import ARG_KEYS
from traceforge.args_provider import factorize_args
from traceforge.formats import cache_settings


def _expected(trace: Any, rows: np.ndarray, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{k: a[k] for k in keys if k in a} for a in trace.args(rows)]


def _check(trace: Any, rows: np.ndarray, keys: tuple[str, ...]) -> int:
    codes, uniq = trace.distinct_args(rows, keys)
    assert codes.dtype == np.int64 and len(codes) == len(rows)
    assert [uniq[c] for c in codes.tolist()] == _expected(trace, rows, keys)
    # Factorized as pandas does it: each unique once, numbered by first appearance.
    assert len({json.dumps(u, sort_keys=True) for u in uniq}) == len(uniq)
    assert codes.tolist() == [] or np.all(np.diff(np.maximum.accumulate(codes)) <= 1)
    return len(uniq)


@pytest.mark.parametrize("cached", [False, True])
def test_kineto_ops_match_whole_dicts(cached: bool, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEFORGE_CACHE", str(tmp_path / "c"))
    monkeypatch.setattr(cache_settings, "_noted", set())
    path = FIXTURES / "eager.pt.trace.json.gz"
    if cached:
        load(path, cache=True)
    t = load(path, cache=cached)
    ev_ = t.events
    ops = ev_.index[(ev_["kind"] == "cpu_op").to_numpy()].to_numpy()
    n = _check(t, ops, ARG_KEYS)
    assert 1 < n < len(ops) // 10  # a model repeats its shapes
    # Keys a row lacks are left out, as in the dicts; rows in any order, repeated.
    _check(t, ops[::-7][:500].repeat(2), ("Input Dims", "no such key", "Concrete Inputs"))
    _check(t, t.gpu().index.to_numpy(), ("bytes", "grid"))
    _check(t, ops[:0], ARG_KEYS)


def test_hand_built_values_and_generic_path(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": i,
         "dur": 1, "args": a}
        for i, a in enumerate([
            {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]},
            {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"], "x": 1},
            {"Input Dims": None},
            {"Input Dims": [[2, 3], [3, 4]]},
            {},
            {"flops": 12, "Input Dims": "a\u001fb"},
            {"Input Dims": [[2,3],[3,4]], "Input type": ["float","float"]},
        ])
    ] + [{"ph": "X", "cat": "cpu_op", "name": "noargs", "pid": 1, "tid": 1, "ts": 9, "dur": 1}]
    p = tmp_path / "t.json"
    text = json.dumps({"traceEvents": events})
    # The same value written without spaces: one unique, not two.
    compact = ('{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":10,"dur":1,'
               '"args":{"Input Dims":[[2,3],[3,4]],"Input type":["float","float"]}}')
    p.write_text(text[:-2] + ", " + compact + "]}")
    t = load(p)
    rows = np.arange(len(t.events))
    assert _check(t, rows, ARG_KEYS) >= 5
    codes, uniq = t.distinct_args(rows, ARG_KEYS)
    assert uniq[codes[0]] == uniq[codes[1]] == {"Input Dims": [[2, 3], [3, 4]],
                                                "Input type": ["float", "float"]}
    assert codes[0] == codes[1] == codes[-1]
    assert uniq[codes[2]] == {"Input Dims": None} and uniq[codes[4]] == {}
    # The generic path (any provider without ``distinct``) gives the same rows.
    g_codes, g_uniq = factorize_args(t.args_provider, rows, ARG_KEYS)
    assert [g_uniq[c] for c in g_codes] == [uniq[c] for c in codes]
    # A non-object args value falls back to the generic path rather than failing.
    events[0]["args"] = [1, 2]
    q = tmp_path / "u.json"
    q.write_text(json.dumps({"traceEvents": events}))
    u = load(q)
    assert _check(u, np.arange(len(u.events)), ARG_KEYS) >= 5


def test_in_memory_trace_uses_whole_dicts() -> None:
    t = make_trace([ev("aten::mm", "cpu_op"), ev("aten::mm", "cpu_op"), ev("k")])
    codes, uniq = t.distinct_args([0, 1, 2], ARG_KEYS)
    assert codes.tolist() == [0, 0, 0] and uniq == [{}]


MANGLED = SHARED / "external/hta/nccl_parser_config/nccl_data.json.gz"


@pytest.mark.skipif(not MANGLED.exists(), reason="shared fixtures absent")
def test_demangled_trace_forwards_or_adds_the_symbol() -> None:
    t = load(MANGLED)
    rows = t.kernels().index.to_numpy()
    _check(t, rows, ("grid", "block"))
    assert _check(t, rows, ("mangled", "grid")) > 1
