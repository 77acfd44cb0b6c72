"""Shaped args encoded per variant (:mod:`traceforge.render.pftrace_shapes`): every row
as its own args dict encodes through ``PacketEncoder.annotations``, whichever of its
slots hold one value across the batch (folded into its variant's pieces) and which
differ (encoded per row)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceforge.formats.arg_shapes import Shapes
from traceforge.render.pftrace_packets import PacketEncoder

_KEYS = ["External id", "correlation", "stream", "a", "k" * 130]
_IDS = ["External id", "correlation", "stream", "graph id"]
_ints = st.one_of(st.integers(-2**63, 2**63 - 1), st.integers(-3, 3),
                  st.integers(120, 20000))
_values = st.one_of(_ints, st.booleans(), st.floats(allow_nan=False), st.text(max_size=4),
                    st.lists(st.integers(0, 9), max_size=2))


def _want(texts: list[bytes], code: np.ndarray,
          ids: list[tuple[str, np.ndarray]]) -> list[bytes]:
    """Each shaped row's args dict, ids set, through ``annotations``."""
    out = []
    for i, text in enumerate(texts):
        if code[i] < 0:
            continue
        a = msgspec.json.decode(text)
        for key, col in ids:
            if col[i] >= 0:
                a[key] = int(col[i])
        out.append(b"".join(PacketEncoder().annotations(list(a), list(a.values()))))
    return out


def test_shapes_encode_as_their_rows_dicts() -> None:
    """Args given as shapes encode as each row's dict does through ``annotations``, ids
    set as ``ChromeSource`` sets them: in the key's place where the row has it (a slot,
    or a text it replaces), else after the row's args, in order; -1 sets nothing. Slots
    of every size and sign, zero, a key long enough for a longer frame, and rows without
    a shape left out."""
    long_key = "k" * 130
    texts = [b'{"External id": %d, "s": "x", "stream": "seven", "n": %d}' % (i, -i * 977)
             for i in range(6)]
    texts += [b'{"%s": %d, "f": 1.5, "l": [1, 2]}' % (long_key.encode(), v)
              for v in (0, 1, -1, 2**62, -(2**62), 127)]
    texts += [b'{}', b'{"a": {"b": 1}}', b'[1]', b'{"d": 0, "d2": 65535, "d3": 123456789}']
    shapes = Shapes().of(texts)
    assert shapes is not None and shapes.code.tolist().count(-1) == 2  # nested, a list
    n = len(texts)
    ids = [("External id", np.array([5, -1] * (n // 2) + [-1] * (n % 2))),
           ("correlation", np.arange(n) - 3),
           ("stream", np.full(n, 9)),
           ("graph id", np.full(n, -1))]
    assert PacketEncoder().shape_annotations(shapes, ids) == _want(texts, shapes.code, ids)
    assert PacketEncoder().shape_annotations(shapes) == _want(texts, shapes.code, [])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(st.dictionaries(st.sampled_from(_KEYS), _values, max_size=4),
                     min_size=1, max_size=4),
       rows=st.lists(st.tuples(st.integers(0, 3), st.lists(_ints, min_size=4, max_size=4),
                               st.booleans()), min_size=1, max_size=40),
       id_cols=st.lists(st.lists(st.sampled_from([-1, 0, 5, 2**40]), min_size=40,
                                 max_size=40), min_size=0, max_size=4))
def test_rows_of_variants_encode_as_their_dicts(
        docs: list[dict[str, Any]], rows: list[tuple[int, list[int], bool]],
        id_cols: list[list[int]]) -> None:
    texts = []
    for d, new_ints, keep in rows:
        doc = docs[d % len(docs)]
        # Some rows keep their doc's ints (a slot one value in a variant), others not.
        it = iter(new_ints)
        texts.append(json.dumps({k: v if keep or type(v) is not int else next(it, v)
                                 for k, v in doc.items()}).encode())
    shapes = Shapes().of(texts)
    if shapes is None:
        return
    n = len(texts)
    ids = [(k, np.asarray(c[:n], dtype=np.int64))
           for k, c in zip(_IDS, id_cols, strict=False)]
    want = _want(texts, shapes.code, ids)
    assert PacketEncoder().shape_annotations(shapes, ids) == want
    assert PacketEncoder().shape_annotations(shapes) == _want(texts, shapes.code, [])


def test_no_row_with_a_shape_and_rows_without_args() -> None:
    texts = [b"[1]", b"{}", b'{"a": [1]}', b"{}"]
    shapes = Shapes().of(texts)
    assert shapes is not None
    assert PacketEncoder().shape_annotations(shapes) == _want(texts, shapes.code, [])
    none = Shapes().of([b"[1]"])
    assert none is not None and PacketEncoder().shape_annotations(none) == []
