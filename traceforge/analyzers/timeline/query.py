"""SQL over a trace: DuckDB on the model's tables, the same for every source format.

Three tables, built only when the query names them:

``events``
    ``row`` (the row label that ``Trace.args`` and the other tables' ``*_row`` columns
    refer to) and every column of ``EVENT_COLUMNS``, names as strings, times in ns.
``activity``
    one row per GPU kernel/memcpy/memset with its launch call and issuing op (the shared
    timeline model's GPU activity table).
``steps``
    the GPU-side profiler-step windows (``step, host_ts, host_end, ts, end``).

Perfetto users query their traces in SQL; this gives Kineto, Nsight Systems and rocprof
traces the same habit without a format-specific schema.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from traceforge.errors import UsageError
from traceforge.model import Trace

if TYPE_CHECKING:
    import pyarrow as pa

#: Table name -> what it holds, for help texts.
TABLES: dict[str, str] = {
    "events": "every event: row, name, kind, cat, ts, dur, pid, tid, device, stream, corr, "
              "ext, graph, rank",
    "activity": "one row per GPU kernel/memcpy/memset with launch call and op",
    "steps": "the steps (from --steps-from or the trace's markers) with their GPU windows: "
             "step, host_ts, host_end, ts, end",
}


def _timeline(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """GPU activity and step windows: the one place this module uses the timeline model."""
    from traceforge.analyzers.timeline.core import timeline

    tl = timeline(trace)
    return tl.activity, tl.windows


def _arrow(df: pd.DataFrame) -> pa.Table:
    """``df`` as Arrow, categoricals decoded to plain strings."""
    import pyarrow as pa

    t = pa.Table.from_pandas(df, preserve_index=False)
    for i, f in enumerate(t.schema):
        if pa.types.is_dictionary(f.type):
            t = t.set_column(i, f.name, t.column(i).cast(f.type.value_type))
    return t


def tables(trace: Trace, names: set[str] | None = None) -> dict[str, pa.Table]:
    """The Arrow tables SQL sees (only ``names`` when given)."""
    want = set(TABLES) if names is None else names & set(TABLES)
    out: dict[str, pa.Table] = {}
    if "events" in want:
        ev = trace.events
        out["events"] = _arrow(pd.concat(
            [pd.DataFrame({"row": ev.index.to_numpy()}, index=ev.index), ev], axis=1))
    if want & {"activity", "steps"}:
        acts, steps = _timeline(trace)
        if "activity" in want:
            out["activity"] = _arrow(acts)
        if "steps" in want:
            out["steps"] = _arrow(steps)
    return out


def _named(query: str) -> set[str]:
    words = {w.lower() for w in re.findall(r"[A-Za-z_]+", query)}
    return {t for t in TABLES if t in words}


#: Where a refused file access points to.
FILES_HINT = ("traceforge sql reads only the trace's tables; --allow-files lets a query "
              "read and write files")


def _targets_input(query: str, inputs: Sequence[Path]) -> str | None:
    """A quoted path in a writing query (COPY, EXPORT, ATTACH) that is one of ``inputs``."""
    if not re.search(r"\b(copy|export|attach)\b", query, re.IGNORECASE):
        return None
    lit: str
    for lit in re.findall(r"'((?:[^']|'')*)'", query):
        cand = Path(lit.replace("''", "'")).expanduser()
        for p in inputs:
            try:
                if cand.exists() and os.path.samefile(cand, p):
                    return lit
            except OSError:
                continue
    return None


def sql(trace: Trace, query: str, *, allow_files: bool = False,
        inputs: Sequence[Path] = ()) -> pd.DataFrame:
    """Run a DuckDB ``query`` over the trace's ``events``, ``activity`` and ``steps``.

    The query sees those three tables and nothing else: once they are registered, the
    connection's external access (files, URLs, ATTACH, COPY), extension install and
    autoload are off and its configuration locked, since queries, like traces, may come
    from others. ``allow_files`` leaves file access on (``read_csv``, ``COPY ... TO``), but
    a writing query that names one of ``inputs`` is still refused.

    Raises UsageError (one line) for a query DuckDB rejects or when duckdb is missing.
    """
    try:
        import duckdb
    except ImportError:
        raise UsageError(
            "SQL queries need duckdb: pip install 'traceforge[sql]'") from None
    if allow_files and (hit := _targets_input(query, inputs)) is not None:
        raise UsageError(f"SQL: the query writes or attaches {hit!r}, an input of this run")
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                             "autoload_known_extensions": False})
    try:
        for name, table in tables(trace, _named(query)).items():
            con.register(name, table)
        if not allow_files:
            con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        try:
            result: pd.DataFrame = con.execute(query).fetch_df()
        except duckdb.Error as e:
            first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
            if isinstance(e, duckdb.PermissionException) or "disabled" in first:
                first = f"{first} ({FILES_HINT})"
            raise UsageError(f"SQL: {first}") from None
        return result
    finally:
        con.close()
