"""JSON and CSV written in pieces (a frame a slice of rows at a time) are the bytes the
whole document gives: orjson over every record at once is the oracle."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceforge.cli import cli
from traceforge.commands.options import emit, emit_pieces
from traceforge.render import frame
from traceforge.render.frame import frame_pieces, json_pieces, render_frame, to_json_bytes
from traceforge.render.schema import machine_frame
from traceforge.render.text import plain_lines, safe_ascii


def whole_json(obj: Any, schema: bool = True) -> bytes:
    """The document as one orjson call with every frame's records in it (the writer
    before pieces: frames inside a document as their machine frames' records; a frame
    alone as :func:`render_frame` wrote it)."""
    if isinstance(obj, pd.DataFrame):
        return whole_frame(obj, "json", schema).removesuffix("\n").encode()
    if schema:
        obj = frame._machine(obj)

    def default(o: Any) -> Any:
        if isinstance(o, pd.DataFrame):
            return frame._records(o)
        if hasattr(o, "item"):
            return o.item()
        if hasattr(o, "tolist"):
            return o.tolist()
        raise TypeError(type(o).__name__)

    raw = orjson.dumps(obj, default=default, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    return raw if safe_ascii(raw) else plain_lines(raw.decode()).encode()


def whole_frame(df: pd.DataFrame, fmt: str, schema: bool = True) -> str:
    """A frame alone as JSON (its records through the key rule) or CSV, in one go."""
    if fmt == "json":
        return whole_json(frame._records(df, schema), schema).decode() + "\n"
    buf = io.StringIO()
    frame._csv_safe(machine_frame(df) if schema else df).to_csv(buf, index=False)
    return buf.getvalue()


TEXTS = st.text(alphabet=st.sampled_from(
    ["a", "Z", " ", "\n", '"', "\\", "=", "-", "é", "\x1b", "\x85", "\u202e", "…", "{", ","]),
    max_size=6)


@st.composite
def frames(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(0, 9))
    cols: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(
            ["name", "total_us", "dur", "step", "count", "pct", "note", "span_ms", "flag",
             "kind"]), unique=True, max_size=6)):
        kind = draw(st.sampled_from(["int", "float", "whole", "text", "nullable", "bool", "mixed"]))
        if kind == "int":
            cols[name] = np.array(draw(st.lists(st.integers(-2**40, 2**40), min_size=n,
                                                max_size=n)), dtype=np.int64)
        elif kind in ("float", "whole"):
            vals = draw(st.lists(st.one_of(st.floats(-1e9, 1e9), st.just(float("nan"))),
                                 min_size=n, max_size=n))
            cols[name] = np.round(vals) if kind == "whole" else np.array(vals, dtype=float)
        elif kind == "text":
            cols[name] = np.array(draw(st.lists(TEXTS, min_size=n, max_size=n)), dtype=object)
        elif kind == "nullable":
            cols[name] = pd.array(draw(st.lists(st.one_of(st.none(), st.integers(-5, 5)),
                                                min_size=n, max_size=n)), dtype="Int64")
        elif kind == "bool":
            cols[name] = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        else:  # an object column of numbers, text and nothing (pd.NA included)
            cols[name] = np.array(draw(st.lists(st.one_of(
                st.none(), st.integers(-3, 3), st.floats(-2, 2), TEXTS, st.just(pd.NA)),
                min_size=n, max_size=n)), dtype=object)
    return pd.DataFrame(cols, index=range(n)) if cols else pd.DataFrame(index=range(n))


DOCS = st.recursive(
    st.one_of(st.none(), st.integers(-9, 9), st.floats(-5, 5), TEXTS, frames()),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["a", "step_us", "rows", "k 1"]),
                                            inner, max_size=3)),
    max_leaves=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCS, st.integers(1, 4), st.booleans())
def test_a_document_in_pieces_is_the_document_whole(doc: Any, rows: int, schema: bool) -> None:
    pieces = list(json_pieces(doc, schema, rows))
    assert b"".join(pieces) == whole_json(doc, schema)
    assert b"".join(pieces) == to_json_bytes(doc, schema)
    for p in pieces:  # each whole characters, and safe to print
        assert safe_ascii(p) or p.decode() == plain_lines(p.decode())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.sampled_from(["json", "csv"]), st.integers(1, 4), st.booleans())
def test_a_frame_in_pieces_is_the_frame_whole(df: pd.DataFrame, fmt: str, rows: int,
                                              schema: bool) -> None:
    text = "".join(frame_pieces(df, fmt, schema=schema, rows=rows))
    assert text == whole_frame(df, fmt, schema)
    assert text == render_frame(df, fmt, schema=schema)


def test_a_frame_alone_has_its_records_keyed_as_a_document_would() -> None:
    # An object column of numbers named *_us: the records are put through the key rule
    # (a frame alone), not inside a document (as before pieces).
    df = pd.DataFrame({"total_us": np.array([1.5, None, 3], dtype=object), "name": ["a", "b", "c"]})
    alone = json.loads(render_frame(df, "json"))
    assert alone == [{"total_ns": 1500, "name": "a"}, {"total_ns": None, "name": "b"},
                     {"total_ns": 3000, "name": "c"}]
    inside = json.loads(to_json_bytes({"t": df}))
    assert inside["t"][0] == {"total_us": 1.5, "name": "a"}


@pytest.mark.parametrize("pieces", [[], [""], ["{", "}"], ["a\n"], ["a", b"\xc3\xa9\x1b\n", ""]])
def test_emit_pieces_prints_what_emit_prints(pieces: list[Any],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    emit_pieces(pieces)
    got = capsys.readouterr().out
    emit("".join(p.decode() if isinstance(p, bytes) else p for p in pieces))
    assert got == capsys.readouterr().out


def test_a_long_path_as_json_and_csv_in_pieces(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Any) -> None:
    """The verbs print in pieces (a small slice here, so the sample's path spans many):
    the same text as the whole document."""
    monkeypatch.setenv("TRACEFORGE_CACHE", str(tmp_path))
    runner = CliRunner()
    args = ["critical-path", "sample:h100-eager"]
    first = {f: runner.invoke(cli, [*args, "--format", f]).output for f in ("json", "csv")}
    monkeypatch.setattr(frame, "PIECE_ROWS", 7)
    seen: list[int] = []
    real = frame.json_pieces

    def counted(*a: Any, **k: Any) -> Any:
        for p in real(*a, **{**k, "rows": 7}):
            seen.append(len(p))
            yield p

    monkeypatch.setattr(frame, "json_pieces", counted)
    for f in ("json", "csv"):
        r = runner.invoke(cli, [*args, "--format", f])
        assert r.exit_code == 0, r.output
        assert r.output == first[f]
    assert len(seen) > 20  # many pieces, each a slice of the path
    doc = json.loads(first["json"])
    assert len(doc["steps"][0]["segments"]) > 7 * 20
