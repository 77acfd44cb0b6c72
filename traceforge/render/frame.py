"""Render one DataFrame as a terminal table, CSV, JSON or Markdown."""

from __future__ import annotations

import io
import math
from typing import Any

import orjson
import pandas as pd

FORMATS: tuple[str, ...] = ("table", "csv", "json", "md")


def _cell(v: Any, digits: int) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return f"{v:,.{digits}f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in df.itertuples(index=False, name=None):
        rec = {}
        for col, v in zip(df.columns, row, strict=True):
            if hasattr(v, "item"):
                v = v.item()
            if isinstance(v, float) and math.isnan(v):
                v = None
            rec[str(col)] = v
        out.append(rec)
    return out


def to_json_bytes(obj: Any) -> bytes:
    """Serialize plain data (dicts, lists, DataFrames) as pretty JSON."""

    def default(o: Any) -> Any:
        if isinstance(o, pd.DataFrame):
            return _records(o)
        if hasattr(o, "item"):
            return o.item()
        if hasattr(o, "tolist"):
            return o.tolist()
        raise TypeError(type(o).__name__)

    return orjson.dumps(obj, default=default, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)


def render_frame(
    df: pd.DataFrame,
    fmt: str = "table",
    *,
    title: str = "",
    digits: int = 2,
    notes: tuple[str, ...] = (),
) -> str:
    """Render ``df`` in ``fmt`` (one of FORMATS); ``title``/``notes`` go to table and md only."""
    if fmt == "json":
        return to_json_bytes(_records(df)).decode() + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        df.to_csv(buf, index=False)
        return buf.getvalue()
    cells = [[_cell(v.item() if hasattr(v, "item") else v, digits) for v in row]
             for row in df.itertuples(index=False, name=None)]
    cols = [str(c) for c in df.columns]
    if fmt == "md":
        lines = []
        if title:
            lines += [f"### {title}", ""]
        lines.append("| " + " | ".join(cols) + " |")
        lines.append("|" + "|".join("---:" if _numeric(df[c]) else "---" for c in df.columns) + "|")
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
        lines += [""] + [f"_{n}_" for n in notes] if notes else []
        return "\n".join(lines) + "\n"
    if fmt == "table":
        return _rich_table(df, cols, cells, title, notes)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def _numeric(s: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(s))


def _rich_table(
    df: pd.DataFrame, cols: list[str], cells: list[list[str]], title: str, notes: tuple[str, ...]
) -> str:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title or None, title_justify="left", show_lines=False)
    for c, name in zip(df.columns, cols, strict=True):
        t.add_column(name, justify="right" if _numeric(df[c]) else "left", overflow="fold")
    for row in cells:
        t.add_row(*row)
    buf = io.StringIO()
    console = Console(file=buf, width=160, force_terminal=False, color_system=None)
    console.print(t)
    for n in notes:
        console.print(n)
    return buf.getvalue()
