"""Args texts grouped by shape (formats.arg_shapes), against a decode of every text.

What a shape must hold: every row with a shape decodes, key for key and in order, to its
shape's args with the row's own values at the slots. What it must leave alone: a number
in a string, in a nested object or list, a float, a duplicated key, a text that is not
an object or not JSON; those rows get no shape (or keep the number in the shape's text),
never a wrong value. Rows of a Kineto trace, fresh and cached, against ``Trace.args``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES
from traceforge import load
from traceforge.args_provider import ArgShapes
from traceforge.formats import cache_settings
from traceforge.formats.arg_shapes import Shapes


def _rows(shapes: ArgShapes) -> list[dict[str, Any] | None]:
    """Each row's args rebuilt from its shape and values (None: no shape)."""
    out: list[dict[str, Any] | None] = []
    k = 0
    for c in shapes.code.tolist():
        if c < 0:
            out.append(None)
            continue
        items = list(shapes.args[c].items())
        for pos in shapes.slots[c]:
            items[pos] = (items[pos][0], int(shapes.values[k]))
            k += 1
        out.append({key: v if isinstance(v, int) else msgspec.json.decode(v)
                    for key, v in items})
    assert k == len(shapes.values)
    return out


def _check(texts: list[bytes]) -> ArgShapes:
    shapes = Shapes().of(texts)
    assert shapes is not None
    assert len(shapes.code) == len(texts)
    for text, got in zip(texts, _rows(shapes), strict=True):
        if got is not None:
            want = msgspec.json.decode(text)
            assert got == want and list(got) == list(want), text
            assert [type(v) for v in got.values()] == [type(v) for v in want.values()]
    return shapes


def test_ids_are_slots_and_the_rest_one_shape() -> None:
    texts = [b'{"External id": %d,"Record function id": 0, "Ev Idx": %d\n}' % (i * 977, i)
             for i in range(50)]
    shapes = _check(texts)
    assert shapes.code.tolist() == [0] * 50
    assert shapes.slots == [(0, 1, 2)]
    assert shapes.values.reshape(50, 3)[:, 0].tolist() == [i * 977 for i in range(50)]
    # Kernels: a few launch shapes, ids per row, lists and floats in the shape.
    kernels = [b'{"device": 0, "stream": 7, "correlation": %d, "grid": [%d, 1, 1], '
               b'"est. achieved occupancy %%": 50.5, "registers per thread": -%d}'
               % (1000 + i, 2 + i % 3, 3) for i in range(30)]
    shapes = _check(kernels)
    assert len(shapes.args) == 3 and shapes.slots == [(0, 1, 2, 5)] * 3


@pytest.mark.parametrize("text", [
    b'{"a": "x: 5, y: 6}", "b": 1}',  # numbers in a string, after a colon
    b'{"a": {"b": 5}, "c": 6}',  # a nested object's int
    b'{"a": [1, 2], "b": [[3]]}',  # ints in lists
    b'{"a": 1.5, "b": 1e3, "c": -2E-2, "d": 10.0}',  # floats
    b'{"a": 1, "a": 2}',  # a duplicated key (the last value wins, in the first's place)
    b'{"a" : 5, "b":5, "c":  5, "d":\t5 }',  # spacing
    b'{"a": 123456789012345678901234, "b": -9223372036854775808}',  # past 18 digits
    b'{"a": -0, "b": 0, "c": -17}',
    b'{"a": true, "b": null, "c": "5"}',
    b'{}',
    b'{"a": -9000000000000000000, "b": 3}',  # the check's own stand-in, as a value
    b'{"\\u00e9\\"": 4, "k\\\\": 5}',  # escapes in keys
])
def test_what_a_shape_must_leave_alone(text: bytes) -> None:
    shapes = _check([text, text.replace(b"5", b"7")])
    # Numbers not at a slot stay in the shape's text: none is read as something else.
    if b"x: 5" in text:
        assert shapes.slots == [(1,)] * len(shapes.args)


@pytest.mark.parametrize("text", [
    b'[1, 2]', b'"text"', b'5', b'{"a": 007}', b'{"a": 1,}', b'{"a": 01}', b'{"a": -}',
    b'{"a": 1', b'not json',
])
def test_texts_that_are_no_object_get_no_shape(text: bytes) -> None:
    shapes = Shapes().of([b'{"a": 1}', text, b'{"a": 2}'])
    assert shapes is not None
    assert shapes.code[1] == -1
    assert _rows(shapes) == [{"a": 1}, None, {"a": 2}]


def test_rows_that_differ_beyond_their_ids_are_not_given_as_shapes() -> None:
    """Where most rows have args of their own (a unique string each), a shape per row
    would cost more than decoding them: none is given (the caller decodes the rows)."""
    unique = [b'{"id": %d, "note": "n%d"}' % (i, i) for i in range(400)]
    assert Shapes().of(unique) is None
    assert Shapes().of(unique[:40]) is not None  # (a few rows: given all the same)
    mostly = [b'{"id": %d, "note": "n%d"}' % (i, i % 50) for i in range(400)]
    _check(mostly)


def test_a_marker_byte_in_the_texts_means_no_shapes() -> None:
    assert Shapes().of([b'{"a": 1}', b'{"a": "\x1e"}']) is None
    assert Shapes().of([b'{"a": "\x1f"}']) is None


def test_shapes_are_numbered_by_first_row_and_kept_between_calls() -> None:
    s = Shapes()
    texts = [b'{"a": %d, "b": "%s"}' % (i, b"xy"[i % 2:i % 2 + 1]) for i in range(6)]
    got = s.of(texts)
    assert got is not None and got.code.tolist() == [0, 1, 0, 1, 0, 1]
    again = s.of(texts[::-1])
    assert again is not None and again.code.tolist() == [0, 1, 0, 1, 0, 1]
    assert again.args[0] is got.args[1]  # checked once
    assert _rows(again) == [msgspec.json.decode(t) for t in texts[::-1]]


@pytest.mark.parametrize("sep", [":", ": "])
def test_ints_of_every_length_rebuild_exactly(sep: str) -> None:
    """Runs of 1 to 19 digits (8 are read as one word; 19 is more than a slot holds),
    signed or not, at the end of an object, before a comma or a newline."""
    texts = []
    for n in range(1, 20):
        for v in (int("9" * n), int("1" + "0" * (n - 1)), int("1234567890123456789"[:n])):
            for sign in (1, -1):
                texts.append(f'{{"a"{sep}{sign * v},"b"{sep}{v}\n,"c"{sep}0}}'.encode())
    shapes = _check(texts)
    assert (shapes.code >= 0).all()
    assert sorted(set(map(len, shapes.slots))) == [1, 3]  # 19 digits: kept in the text


_keys = st.sampled_from(["External id", "Ev Idx", "a", "b", "c:", "d\"", "e 5"])
_values = st.recursive(
    st.one_of(st.integers(-2**63, 2**63 - 1), st.integers(-300, 300), st.booleans(),
              st.none(), st.floats(allow_nan=False, allow_infinity=False),
              st.text(alphabet=": ,}{\"\\5-0\n", max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(_keys, inner, max_size=3)),
    max_leaves=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(st.dictionaries(_keys, _values, max_size=5), min_size=1, max_size=6),
       compact=st.booleans(), indent=st.booleans())
def test_any_args_rebuild_exactly(docs: list[dict[str, Any]], compact: bool,
                                  indent: bool) -> None:
    seps = (",", ":") if compact else (", ", ": ")
    # Each doc with its ints changed too: same shapes, other values.
    texts = [json.dumps(d, separators=seps, indent=1 if indent else None).encode()
             for d in docs + [_other_ints(d) for d in docs]]
    _check(texts)


def _other_ints(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _other_ints(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_other_ints(x) for x in v]
    if isinstance(v, int) and not isinstance(v, bool):
        return v * 7 + 3 if abs(v) < 2**59 else v
    return v


def test_kineto_rows_fresh_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    monkeypatch.setenv("TRACEFORGE_CACHE", str(tmp_path / "c"))
    monkeypatch.setattr(cache_settings, "_noted", set())
    path = FIXTURES / "eager.pt.trace.json.gz"
    load(path, cache=True)
    for cached in (False, True):
        t = load(path, cache=cached)
        labels = t.events.index.to_numpy()[::3]
        shapes = t.arg_shapes(labels)
        assert shapes is not None and (shapes.code >= 0).all()
        assert len(shapes.args) < len(labels) // 10
        assert _rows(shapes) == t.args(labels)
    assert load(path).with_steps(None).arg_shapes([]) is None
