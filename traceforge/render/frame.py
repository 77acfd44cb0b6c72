"""Render one DataFrame as a terminal table, CSV, JSON or Markdown.

JSON and CSV carry times as exact integer ns (``total_us`` is written as ``total_ns``),
counts as integers and everything else at full precision (:mod:`traceforge.render.schema`).
Tables and Markdown are for reading, and format by column-name convention so that every
verb gets the same presentation without code of its own:

- columns of integer nanoseconds (named ``*_ns``, or the model's ``ts``, ``dur``, ``end``)
  are shown in s when the column reaches 1 s, in ms when it reaches 1 ms, else in us,
  with the unit in the header
  (``window_ns`` -> ``window (ms)``) and enough decimals for five significant digits of the
  largest value and one of the smallest (at most 3); ``-1`` (unknown) is left blank;
- columns of bytes (``*_bytes``, ``bytes``) likewise in GiB, MiB, KiB or B
  (``peak_bytes`` -> ``peak (GiB)``);
- a float that holds a whole number (a count such as ``calls`` or ``kernels per step``) is
  shown without decimals; other floats with ``digits`` decimals, percentages and ratios
  (``pct``, ``*_pct``, ``ratio``, ``speedup``) always with them;
- ``step`` and ``stream`` -1 (a whole-trace or per-device row) is shown as ``all``; ids
  without thousands separators; text escaped and capped (:mod:`traceforge.render.text`);
- headers are spelled out (terminal, Markdown, HTML), so that rich can wrap them between
  words: ``median_launch_delay_us`` -> ``median launch delay (us)``, ``host_wait_pct`` ->
  ``host wait %``.
"""

from __future__ import annotations

import io
import math
import re
import secrets
from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson
import pandas as pd

from traceforge.render.output_formats import FORMATS
from traceforge.render.schema import TIME_SUFFIXES, is_fraction_column, machine_frame, ns_name
from traceforge.render.text import csv_cell, display, plain, plain_lines, safe_ascii

#: Columns that hold integer nanoseconds besides those named ``*_ns`` (model columns).
NS_COLUMNS = ("ts", "dur", "end")

#: Integer columns that name things (shown without thousands separators).
ID_COLUMNS = ("step", "stream", "device", "rank", "pid", "tid", "correlation")

#: Id columns where -1 stands for "all of them" (a per-device or whole-trace row).
ALL_COLUMNS = ("step", "stream")
ALL = "all"


def _cell(v: Any, digits: int) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        if v.is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,.{digits}f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if v is None:
        return ""
    return display(v)


def _column_cells(name: str, s: pd.Series, digits: int) -> list[str]:
    """One column's cells: a whole-number float (a count) without decimals, other floats
    with ``digits``, but a percentage or ratio always with ``digits``; ids without
    thousands separators, -1 as "all"."""
    if name in ID_COLUMNS and pd.api.types.is_integer_dtype(s):
        return [ALL if v == -1 and name in ALL_COLUMNS else str(v) for v in s.tolist()]
    if is_fraction_column(name) and pd.api.types.is_float_dtype(s):
        return ["" if not math.isfinite(v) else f"{v:,.{digits}f}"
                for v in s.to_numpy(dtype=float, na_value=np.nan).tolist()]
    return [_cell(v.item() if hasattr(v, "item") else v, digits) for v in s]


def is_ns_column(name: str) -> bool:
    """Whether a column holds integer nanoseconds, by the naming convention."""
    return name.endswith("_ns") or name in NS_COLUMNS


#: Units of a column of integer ns and of one of bytes: (from, unit, divisor), largest first.
TIME_UNITS = ((1e9, "s", 1e9), (1e6, "ms", 1e6), (0.0, "us", 1e3))
BYTE_UNITS = ((2.0**30, "GiB", 2.0**30), (2.0**20, "MiB", 2.0**20), (2.0**10, "KiB", 2.0**10),
              (0.0, "B", 1.0))


def is_bytes_column(name: str) -> bool:
    """Whether a column holds a number of bytes, by the naming convention."""
    return name == "bytes" or name.endswith("_bytes")


def _ns_column(name: str, s: pd.Series,
               units: tuple[tuple[float, str, float], ...] = TIME_UNITS,
               suffix: str = "_ns") -> tuple[str, list[str]] | None:
    """Header and cells of an ns (or bytes) column in the unit its largest value fits;
    None if it holds no numbers."""
    vals = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    known = vals[np.isfinite(vals) & (vals != -1)]
    if len(s) and not len(known) and s.notna().any() and not (vals == -1).any():
        return None  # not numbers after all: leave it to the generic formatter
    big = np.abs(known).max() if len(known) else 0.0
    unit, scale = next((u, d) for lo, u, d in units if big >= lo)
    shown = known / scale
    nonzero = np.abs(shown[shown != 0])
    decimals = 0
    if len(nonzero):
        decimals = max(4 - math.floor(math.log10(nonzero.max())),
                       -math.floor(math.log10(nonzero.min())))
    decimals = min(max(decimals, 0), 3)
    cells = ["" if not math.isfinite(v) or v == -1 else f"{v / scale:,.{decimals}f}"
             for v in vals]
    base = name[: -len(suffix)] if name.endswith(suffix) and name != suffix[1:] else name
    return f"{base} ({unit})", cells


def spelled(header: str) -> str:
    """A terminal table header: units in parentheses, words separated by spaces."""
    for suffix, unit in (("_pct", " %"), ("_us", " (us)"), ("_ms", " (ms)")):
        if header.endswith(suffix) and len(header) > len(suffix):
            header = header[: -len(suffix)] + unit
            break
    return header.replace("_", " ")


def human(df: pd.DataFrame, digits: int = 2) -> tuple[list[str], list[list[str]]]:
    """Headers and cell strings for people (table, Markdown, HTML): times in humane units
    named in the header, counts whole, names escaped and capped."""
    headers: list[str] = []
    columns: list[list[str]] = []
    for c in df.columns:
        s = df[c]
        ns = (_ns_column(str(c), s) if is_ns_column(str(c)) else
              _ns_column(str(c), s, BYTE_UNITS, "_bytes")
              if is_bytes_column(str(c)) and pd.api.types.is_numeric_dtype(s) else None)
        if ns is not None:
            headers.append(ns[0])
            columns.append(ns[1])
            continue
        headers.append(plain(str(c)))
        columns.append(_column_cells(str(c), s, digits))
    rows = [list(r) for r in zip(*columns, strict=True)] if columns else []
    return headers, rows


def _records(frame: pd.DataFrame, schema: bool = True) -> list[dict[str, Any]]:
    """Rows as dicts of plain values (missing: None), taken column by column."""
    df = machine_frame(frame) if schema else frame
    if df.shape[1] == 0:
        return [{} for _ in range(len(df))]
    names = [str(c) for c in df.columns]
    columns = [_plain_values(df.iloc[:, i]) for i in range(df.shape[1])]
    return [dict(zip(names, vals, strict=True)) for vals in zip(*columns, strict=True)]


def _plain_values(s: pd.Series) -> list[Any]:
    vals: list[Any] = s.tolist()
    kind = s.dtype.kind if isinstance(s.dtype, np.dtype) else "O"
    if kind in "iub":  # Python ints and bools already, nothing missing
        return vals
    if kind == "f":
        return [None if v != v else v for v in vals]
    if kind == "O" and pd.api.types.infer_dtype(s, skipna=False) == "string":
        return vals  # names: str already, none missing
    return [_plain(v) for v in vals]


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def _machine(obj: Any) -> Any:
    """``obj`` with every key of a derived time (``*_us``, ``*_ms``) holding a number or
    nothing renamed ``*_ns`` and its value in integer ns (:mod:`traceforge.render.schema`)."""
    if isinstance(obj, dict):
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            target = ns_name(k) if isinstance(k, str) else None
            if (type(v) not in _LEAVES and hasattr(v, "item")
                    and not isinstance(v, pd.DataFrame | pd.Series)):
                v = v.item()
            if (target is not None and target not in obj and (v is None or (
                    isinstance(v, int | float) and not isinstance(v, bool)))):
                out[target] = None if v is None or (isinstance(v, float) and not
                                                    math.isfinite(v)) else (
                    -1 if v == -1 else int(round(v * TIME_SUFFIXES[k[-3:]])))
            else:
                out[k] = v if type(v) in _LEAVES else _machine(v)
        return out
    if isinstance(obj, list | tuple):
        return [v if type(v) in _LEAVES else _machine(v) for v in obj]
    return obj


#: Values :func:`_machine` hands on as they are (a long path's records are mostly these).
_LEAVES = frozenset((int, float, str, bool, type(None)))


def to_json_bytes(obj: Any, schema: bool = True) -> bytes:
    """Serialize plain data (dicts, lists, DataFrames) as pretty JSON, times as integer ns
    (:mod:`traceforge.render.schema`; ``schema=False``: keys as they are)."""
    return b"".join(json_pieces(obj, schema))


#: Rows of a frame encoded at a time when JSON or CSV is written in pieces.
PIECE_ROWS = 1 << 14


def json_pieces(obj: Any, schema: bool = True, rows: int = PIECE_ROWS) -> Iterator[bytes]:
    """:func:`to_json_bytes` of ``obj`` in pieces, each of them whole JSON values and
    safe text: a DataFrame inside ``obj`` (or ``obj`` itself) is written ``rows`` records
    at a time, so a frame of millions of rows (a critical path's pieces, a query's rows)
    is never held as one dict per row or as one text. Joined, the pieces are the bytes
    ``orjson.dumps`` gives for the whole document (the records spliced in at the frame's
    place and depth; tests compare them)."""
    # A frame inside a document is written as its machine frame; a frame given alone as
    # its machine frame where ``schema``, each record then put through the key rule too.
    alone = isinstance(obj, pd.DataFrame)
    if schema:
        obj = _machine(obj)
    frames: list[pd.DataFrame] = []
    # A frame's place in the outline: a string no text from a trace can hold (it is made
    # afresh for each document).
    token = secrets.token_hex(16)

    def default(o: Any) -> Any:
        if isinstance(o, pd.DataFrame):
            frames.append(o)
            return f"{token}.{len(frames) - 1}"
        return _json_value(o)

    outline = orjson.dumps(obj, default=default,
                           option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    at = 0
    for m in re.finditer(b'"' + token.encode() + rb'\.(\d+)"', outline):
        yield _safe_json(outline[at:m.start()])
        line = outline.rfind(b"\n", 0, m.start()) + 1
        depth = len(outline[line:m.start()]) - len(outline[line:m.start()].lstrip(b" "))
        yield from _frame_json(frames[int(m.group(1))], depth, rows, schema or not alone,
                               schema and alone)
        at = m.end()
    yield _safe_json(outline[at:])


def _json_value(o: Any) -> Any:
    """What orjson writes for a value it does not know (numpy scalars and arrays)."""
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(type(o).__name__)


def _frame_json(df: pd.DataFrame, pad: int, rows: int, machine: bool, keyed: bool
                ) -> Iterator[bytes]:
    """The records of ``df`` (its machine frame where ``machine``) as the pretty JSON list
    orjson writes at a line indented by ``pad`` spaces, ``rows`` records at a time
    (``keyed``: each record through :func:`_machine`, where a key or value may need it)."""
    if not len(df):
        yield b"[]"
        return
    df = machine_frame(df) if machine else df  # (its integer test takes whole columns)
    keyed = keyed and (any(ns_name(str(c)) for c in df.columns) or any(
        df[c].dtype == object for c in df.columns))
    indent = b"\n" + b" " * pad
    yield b"["
    for a in range(0, len(df), rows):
        recs = _records(df.iloc[a:a + rows], False)
        if keyed:
            recs = _machine(recs)
        text = orjson.dumps(recs, default=_json_value,
                            option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
        # "[\n  {...},\n  {...}\n]": the records, each line moved ``pad`` further in.
        body = text[1:-2].replace(b"\n", indent)
        yield _safe_json((b"," if a else b"") + body)
    yield _safe_json(indent + b"]")


def _safe_json(raw: bytes) -> bytes:
    """``raw`` JSON with the characters orjson leaves raw that a terminal acts on (C1,
    bidirectional controls; it escapes C0) written as ``\\uXXXX``: the same string to a
    JSON reader."""
    return raw if safe_ascii(raw) else plain_lines(raw.decode()).encode()


def frame_pieces(df: pd.DataFrame, fmt: str = "table", *, title: str = "", digits: int = 2,
                 notes: tuple[str, ...] = (), width: int | None | str = "auto",
                 schema: bool = True, rows: int = PIECE_ROWS) -> Iterator[str]:
    """:func:`render_frame` in pieces: JSON and CSV ``rows`` rows at a time (a frame of
    millions of rows is never one text), a table or Markdown as one piece."""
    if fmt == "json":
        yield from (p.decode() for p in json_pieces(df, schema, rows))
        yield "\n"
        return
    if fmt == "csv":
        out = machine_frame(df) if schema else df  # (whole columns: see json_pieces)
        for a in range(0, max(len(out), 1), rows):
            buf = io.StringIO()
            _csv_safe(out.iloc[a:a + rows]).to_csv(buf, index=False, header=not a)
            yield buf.getvalue()
        return
    yield render_frame(df, fmt, title=title, digits=digits, notes=notes, width=width,
                       schema=schema)


def render_frame(
    df: pd.DataFrame,
    fmt: str = "table",
    *,
    title: str = "",
    digits: int = 2,
    notes: tuple[str, ...] = (),
    width: int | None | str = "auto",
    schema: bool = True,
) -> str:
    """Render ``df`` in ``fmt`` (one of FORMATS); ``title``/``notes`` go to table and md only;
    a table fits ``width`` columns (None: no limit; "auto": the terminal's, see
    :func:`traceforge.render.terminal.table_width`); ``schema=False`` writes JSON and CSV
    columns as the frame names them (a user's SQL query), without the ns rule."""
    if fmt in ("json", "csv"):
        return "".join(frame_pieces(df, fmt, schema=schema))
    cols, cells = human(df, digits)
    if fmt == "md":
        lines = []
        if title:
            lines += [f"### {plain(title)}", ""]
        lines.append("| " + " | ".join(spelled(c).replace("|", "\\|") for c in cols) + " |")
        lines.append("|" + "|".join("---:" if _numeric(df[c]) else "---" for c in df.columns) + "|")
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
        lines += [""] + [f"_{plain(n)}_" for n in notes] if notes else []
        return "\n".join(lines) + "\n"
    if fmt == "table":
        from traceforge.render.terminal import render, table_width

        return render([spelled(c) for c in cols], [list(c) for c in zip(*cells, strict=True)]
                      if cells else [[] for _ in cols], [_numeric(df[c]) for c in df.columns],
                      title=title, notes=notes,
                      width=table_width() if isinstance(width, str) else width)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def _numeric(s: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(s))




def _csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its text cells escaped and never read as spreadsheet formulas."""
    text = [c for c in df.columns if df[c].dtype == object or pd.api.types.is_string_dtype(df[c])]
    if not text:
        return df
    out = df.copy()
    for c in text:
        out[c] = _csv_cells(out[c])
    out.columns = pd.Index([csv_cell(str(c)) for c in out.columns])
    safe: pd.DataFrame = out
    return safe


def _csv_cells(s: pd.Series) -> pd.Series:
    """:func:`csv_cell` of every cell of ``s``; of each distinct text once where ``s``
    holds only text (names repeat: a 1M-piece critical path has a few thousand). Other
    columns cell by cell (``1``, ``1.0`` and ``True`` are one key to a hash), each cell
    as itself: a number beside a missing value stays as written (``Series.map`` made the
    column float, so ``0`` was written ``0.0``, and a slice of rows differed from the
    whole)."""
    vals = s.to_numpy(dtype=object)
    if pd.api.types.infer_dtype(vals, skipna=False) != "string":
        cellwise = pd.Series([csv_cell(v) for v in vals.tolist()], index=s.index,
                             dtype=object)
        return cellwise
    codes, uniques = pd.factorize(vals)
    cells = np.array([csv_cell(u) for u in uniques], dtype=object)
    # Object, as cell by cell gives (pandas 3 would make a list of str its str dtype).
    cells_of: pd.Series = pd.Series(cells[codes], index=s.index, dtype=object, copy=False)
    return cells_of
