"""Verbs with several tables: each is reachable in every format.

Table and Markdown output show every table. JSON is one object keyed by table. A CSV file
holds one table, so ``--format csv`` prints the verb's main table and names the others on
stderr; ``--table NAME`` picks one table (in any format) and ``-o DIR`` writes each table
to ``DIR/NAME.csv`` (``.json``, ``.md``, ``.txt``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from traceforge import output_file as output
from traceforge.commands.options import emit, emit_frame, emit_json
from traceforge.errors import UsageError
from traceforge.render.tables import Table, render_table

__all__ = ["Table", "check_table", "emit_tables", "table_options"]

F = TypeVar("F", bound=Callable[..., Any])

_EXT = {"csv": "csv", "json": "json", "md": "md", "table": "txt"}


def table_options(f: F) -> F:
    """``--table NAME`` and ``-o/--out-dir DIR`` for verbs with several tables."""
    f = click.option("-o", "--out-dir", "out_dir", default=None, metavar="DIR",
                     type=click.Path(file_okay=False, path_type=str),
                     help="Write every table to DIR/NAME.csv (or .json/.md/.txt).")(f)
    return click.option("--table", "table", default=None, metavar="NAME",
                        help="Show only this table (the verb's help lists them).")(f)


def emit_tables(tables: Sequence[Table], fmt: str, *, table: str | None = None,
                out_dir: str | None = None, doc: dict[str, Any] | None = None,
                head: str = "") -> None:
    """Print (or write) ``tables`` as the options ask; ``doc`` is the whole JSON object
    (default: tables keyed by name), ``head`` lines printed before table/md output."""
    names = [t.name for t in tables]
    if table is not None:
        check_table(table, names)
        tables = [t for t in tables if t.name == table]
    if out_dir is not None:
        folder = Path(out_dir)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"{out_dir}: cannot write ({e.strerror})") from None
        for t in tables:
            output.wrote(output.write(folder / f"{t.name}.{_EXT[fmt]}", render_table(t, fmt)))
        return
    if fmt == "json":
        if table is not None:
            emit_frame(tables[0].frame, fmt)  # (render_table's JSON, in pieces)
        else:
            emit_json(doc or {t.name: t.frame for t in tables})
        return
    if fmt == "csv":
        emit_frame(tables[0].frame, fmt)
        if len(tables) > 1:
            click.echo(f"traceforge: CSV holds one table ({tables[0].name}); the others: "
                       + ", ".join(names[1:]) + " (use --table NAME or -o DIR)", err=True)
        return
    emit(head + "\n".join(render_table(t, fmt) for t in tables))


def check_table(table: str | None, names: Sequence[str]) -> None:
    """A UsageError when ``--table`` names none of ``names``; a verb that knows its table
    names before the work calls it first, so a typo fails before a long analysis."""
    if table is not None and table not in names:
        raise UsageError(f"--table {table}: no such table (have: {', '.join(names)})")
