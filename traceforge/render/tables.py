"""A verb's named tables: :class:`Table` (a frame with its name, title and notes) and how
one is rendered. Renderers build lists of them; ``traceforge.commands.tables`` prints them
in every format (``--table NAME``, ``-o DIR``) and reports lay them out as sections."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from traceforge.render.frame import render_frame


@dataclass(frozen=True)
class Table:
    """One named table of a verb's output, with its title and notes for people and the
    decimals its floats are shown with in table and Markdown output."""

    name: str
    frame: pd.DataFrame
    title: str = ""
    notes: tuple[str, ...] = field(default=())
    digits: int = 2


def render_table(t: Table, fmt: str) -> str:
    """``t`` in ``fmt``: its records (JSON) or bare frame (CSV); with its title and notes
    as a terminal table or Markdown."""
    if fmt in ("json", "csv"):
        return render_frame(t.frame, fmt)
    return render_frame(t.frame, fmt, title=t.title, digits=t.digits, notes=t.notes)


def drop_empty(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` without the columns that hold no value at all (NaN or "" throughout)."""
    def blank(s: pd.Series) -> bool:
        if s.dtype.kind == "f":
            return bool(s.isna().all())
        # object, or pandas 3's default "str" dtype (where "" is no longer object)
        text = s.dtype == object or pd.api.types.is_string_dtype(s.dtype)
        return bool(text and len(s) and (s.isna() | s.isin([""])).all())

    keep = [c for c in df.columns if not blank(df[c])]
    out: pd.DataFrame = df[keep]
    return out
