"""Per-event columns of a run of decoded Kineto events, and how runs join into one.

The Kineto reader decodes a file into msgspec structs and then walks them a few times,
building one numpy column per pass. This module holds those passes. They work on any run
of consecutive events: the whole file, or one chunk of it decoded in a worker process
(:mod:`traceforge.formats.kineto_chunks`). Joining the runs' columns in file order gives
the same columns as one pass over the whole file, codes and id numbering included.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, count, repeat
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from traceforge.formats.kineto_schema import EVENT_PHASES, FLOW_PHASES, KIND_OF_CAT, PH_CODE
from traceforge.kinds import GPU_KINDS, KINDS

#: Phase codes of rows of the table (complete, begin/end, instant events).
EVENT_CODES = [PH_CODE[c] for c in EVENT_PHASES]
_FLOW_CODES = [PH_CODE[c] for c in FLOW_PHASES]
#: Kind codes of rows on a GPU (they carry a device and a stream).
ON_DEVICE = [KINDS.index(k) for k in (*GPU_KINDS, "gpu_annotation", "sync")]


@dataclass
class Codes:
    """A column of strings (names, categories, string ids) as first-appearance codes
    (int32) and its distinct values.

    ``None`` (only the lenient decode yields it) is kept as a value here; the reader turns
    it into a missing value when it builds the categorical.
    """

    codes: np.ndarray
    values: list[Any]


@dataclass
class Columns:
    """The columns of ``n`` consecutive events; row-wise ones cover the kept rows only.

    Kept rows are complete/begin/end/instant events of the kinds asked for. Times stay
    float microseconds: the reader checks and converts them once all runs are joined.
    """

    n: int
    has_phase: bool  # some event has a non-empty ph (else it is not a trace at all)
    ph: np.ndarray  # int8 phase codes, every event (-1: unknown or none)
    ts_us: np.ndarray | None  # float64 every event; None: a ts/dur is not a number
    dur_us: np.ndarray | None
    cat: Codes  # every event
    kept: np.ndarray  # int64 indices of kept rows among the run's events
    name: Codes  # kept rows
    pidtid: np.ndarray  # int64 (2, kept): pid, tid of kept rows; 0 where not an int
    odd_row: np.ndarray  # rows with an id that is not an int,
    odd_col: np.ndarray  # ... 0 where it is the pid, 1 the tid
    odd: Codes  # ... and the id each of them holds
    ints: np.ndarray  # int64 (5, kept): External id, correlation, stream, device, graph id
    meta: list[Any]  # metadata (ph M) events
    flows: list[Any]  # flow events other than ac2g
    flow_at: np.ndarray  # their indices among the run's events


def codes_of(values: Iterable[Any], n: int) -> Codes:
    """First-appearance codes of ``n`` values in one pass at C speed.

    ``setdefault`` files each new value under its position, so the codes come out as
    first-appearance positions, which numpy then renumbers densely. A trace has few
    distinct names among ~1M events; this is ~3x faster than factorizing an object array.
    """
    first: dict[Any, int] = {}
    pos = np.fromiter(map(first.setdefault, values, count()), dtype=np.int64, count=n)
    dense = np.empty(max(n, 1), dtype=np.int32)
    dense[np.fromiter(first.values(), dtype=np.int64, count=len(first))] = np.arange(
        len(first), dtype=np.int32)
    return Codes(dense[pos], list(first))


def _floats(events: Sequence[Any], n: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    try:
        # One pass for both: Kineto's ts and dur are numbers (NaN where absent).
        tsdur = np.fromiter(chain.from_iterable(map(attrgetter("ts", "dur"), events)),
                            dtype=np.float64, count=2 * n).reshape(n, 2)
    except (TypeError, ValueError):
        return None, None  # a string or null: the reader parses them one by one
    return np.ascontiguousarray(tsdur[:, 0]), np.ascontiguousarray(tsdur[:, 1])


def split_ids(values: list[Any]) -> tuple[np.ndarray, np.ndarray, Codes]:
    """pid/tid (or flow id) values as int64, and the positions and values of those that
    are not ints, for the reader to number (0 stands at those positions meanwhile).

    Nearly all ids are ints; Kineto's few string pids ("Spans", "Traces") and legacy
    string tids are found among the few distinct values instead of testing every one.
    Whether a value is an int is decided here, never by numpy's conversion, which would
    also read " 5" or "1_000" as numbers. Raises OverflowError past 64 bits.
    """
    odd = [v for v in dict.fromkeys(values) if type(v) is not int]
    if not odd:
        return (np.array(values, dtype=np.int64), np.empty(0, np.int64),
                Codes(np.empty(0, np.int32), []))
    which = dict(zip(odd, count(), strict=False))
    code = np.fromiter(map(which.get, values, repeat(-1)), dtype=np.int32, count=len(values))
    at = np.flatnonzero(code >= 0)
    zero = dict.fromkeys(odd, 0)
    ints = np.fromiter(map(zero.get, values, values), dtype=np.int64, count=len(values))
    return ints, at, Codes(code[at], odd)


def pair_ids(pairs: Codes, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, Codes]:
    """The pid and tid of rows whose (pid, tid) is ``pairs.values[rows]``, as int64 (2,
    len(rows)), each row contiguous, and as :func:`split_ids` has them, the positions
    (``2 * row + 0`` for the pid, ``+ 1`` for the tid) and values of those that are not
    ints.

    Worked out once per distinct pair (a trace has a few hundred). The values that are
    not ints come in the order of their first appearance among the rows, as
    :func:`split_ids` of the pid, tid sequence gives them, where the pairs are numbered in
    order of first appearance among the rows: a value's first row is the first row of its
    pair. (``True`` and ``1``, equal as keys, are the same id either way.) Raises
    OverflowError past 64 bits.
    """
    flat, at, odd = split_ids(list(chain.from_iterable(pairs.values)))
    ids = np.take(flat.reshape(-1, 2).T, rows, axis=1)
    if not len(at):
        return ids, at, odd
    code = np.full(flat.shape, -1, dtype=np.int32)
    code[at] = odd.codes
    each = code.reshape(-1, 2)[rows].ravel()  # per row: pid's, tid's
    where = np.flatnonzero(each >= 0)
    return ids, where, Codes(each[where], odd.values)


def columns(events: Sequence[Any], kinds: Collection[str] | None) -> Columns:
    """The columns of ``events``; indices count from the first of them.

    The string and id fields (phase, category, name, pid, tid) are read in one pass as a
    key per event and worked out once per distinct key (a trace has a few hundred to a
    few thousand): whether a row is kept depends on its key alone, and a value's first
    row (kept rows for the name and ids) is the first row of some key, so numbering the
    keys' values in key order gives the codes a pass per field gives.

    Raises OverflowError (with the message for the user) for an id past 64 bits.
    """
    n = len(events)
    keys = codes_of(map(attrgetter("ph", "cat", "name", "pid", "tid"), events), n)
    every = keys.values
    k_ph = np.fromiter(map(PH_CODE.get, map(itemgetter(0), every), repeat(-1)),
                       dtype=np.int8, count=len(every))
    ph = k_ph[keys.codes]
    k_cat = codes_of(map(itemgetter(1), every), len(every))
    cat = Codes(k_cat.codes[keys.codes], k_cat.values)
    k_kind = kind_codes(k_cat.values)[k_cat.codes]
    # Phase tests on the int8 codes (string arrays cost ~40 ms per 1M events).
    k_keep = np.isin(k_ph, EVENT_CODES)
    if kinds is not None:
        k_keep &= np.isin(k_kind, [KINDS.index(k) for k in kinds])
    kept_keys = np.flatnonzero(k_keep)
    renumber = np.full(len(every) + 1, -1, dtype=np.int64)
    renumber[kept_keys] = np.arange(len(kept_keys))
    row_key = renumber[keys.codes]  # per event: its key among the kept keys, or -1
    local = np.flatnonzero(row_key >= 0)
    row_key = row_key[local]
    m = len(local)
    kept = [every[k] for k in kept_keys.tolist()]
    names = codes_of(map(itemgetter(2), kept), len(kept))
    try:
        pairs = codes_of(map(itemgetter(3, 4), kept), len(kept))
        pidtid, odd_at, odd = pair_ids(pairs, pairs.codes[row_key])
    except OverflowError:
        raise OverflowError("a pid or tid does not fit in 64 bits") from None
    ts_us, dur_us = _floats(events, n)
    evs = events if m == n else [events[i] for i in local.tolist()]
    # External id, correlation and graph id for every row. Device and stream only mean
    # something on GPU rows (the reader sets -1 elsewhere), so only those are read.
    # One row per id (each contiguous, as the table's columns will be), filled here in the
    # workers rather than transposed by the reader after the join.
    ints = np.full((5, m), -1, dtype=np.int64)
    gpu = np.flatnonzero(np.isin(k_kind[kept_keys], ON_DEVICE)[row_key])
    try:
        ints[[0, 1, 4]] = np.fromiter(
            chain.from_iterable(map(attrgetter("args.ext", "args.correlation", "args.graph"),
                                    evs)),
            dtype=np.int64, count=3 * m).reshape(m, 3).T
        if len(gpu):
            ints[2:4, gpu] = np.fromiter(
                chain.from_iterable(map(attrgetter("args.stream", "args.device"),
                                        map(evs.__getitem__, gpu.tolist()))),
                dtype=np.int64, count=2 * len(gpu)).reshape(len(gpu), 2).T
    except OverflowError:
        raise OverflowError("an id (External id, correlation, stream, device or graph id) "
                            "does not fit in 64 bits") from None
    # ac2g flows (launch call -> GPU activity) repeat what the correlation ids on both
    # events already say: the model keeps the link in ``corr`` and writers regenerate the
    # arrows, so only other flows (fwdbwd, legacy async_cpu_to_gpu, ...) are kept.
    flow = np.isin(ph, _FLOW_CODES)
    if "ac2g" in cat.values:
        flow &= cat.codes != cat.values.index("ac2g")
    flow_at = np.flatnonzero(flow)
    return Columns(
        n=n,
        has_phase=any(map(itemgetter(0), every)),
        ph=ph,
        ts_us=ts_us,
        dur_us=dur_us,
        cat=cat,
        kept=local,
        name=Codes(names.codes[row_key], names.values),
        pidtid=pidtid,
        odd_row=odd_at // 2,
        odd_col=odd_at % 2,
        odd=odd,
        ints=ints,
        meta=[events[i] for i in np.flatnonzero(ph == PH_CODE["M"]).tolist()],
        flows=[events[i] for i in flow_at.tolist()],
        flow_at=flow_at,
    )


def kind_codes(cats: Sequence[Any]) -> np.ndarray:
    """Kind code per category value, and ``other`` at the end (for code -1)."""
    return np.array([KINDS.index(KIND_OF_CAT.get(str(c).lower(), "other")) for c in cats]
                    + [KINDS.index("other")], dtype=np.int8)


def _join_codes(parts: Sequence[Codes]) -> Codes:
    """Codes over the runs in order: first appearance across all of them, as one pass."""
    if len(parts) == 1:
        return parts[0]
    index: dict[Any, int] = {}
    recoded = []
    for p in parts:
        lookup = np.fromiter((index.setdefault(v, len(index)) for v in p.values),
                             dtype=np.int32, count=len(p.values))
        recoded.append(lookup[p.codes] if len(p.values) else p.codes)
    return Codes(np.concatenate(recoded), list(index))


def join(parts: Sequence[Columns]) -> Columns:
    """One run's columns from consecutive runs' (in file order)."""
    if len(parts) == 1:
        return parts[0]
    odd_row, kept, flow_at = [], [], []
    rows = events = 0
    for p in parts:
        odd_row.append(p.odd_row + rows)
        kept.append(p.kept + events)
        flow_at.append(p.flow_at + events)
        rows += p.pidtid.shape[1]
        events += p.n
    ts = [p.ts_us for p in parts]
    dur = [p.dur_us for p in parts]
    return Columns(
        n=sum(p.n for p in parts),
        has_phase=any(p.has_phase for p in parts),
        ph=np.concatenate([p.ph for p in parts]),
        ts_us=_joined(ts),
        dur_us=_joined(dur),
        cat=_join_codes([p.cat for p in parts]),
        kept=np.concatenate(kept),
        name=_join_codes([p.name for p in parts]),
        pidtid=np.concatenate([p.pidtid for p in parts], axis=1),
        odd_row=np.concatenate(odd_row),
        odd_col=np.concatenate([p.odd_col for p in parts]),
        odd=_join_codes([p.odd for p in parts]),
        ints=np.concatenate([p.ints for p in parts], axis=1),
        meta=[e for p in parts for e in p.meta],
        flows=[e for p in parts for e in p.flows],
        flow_at=np.concatenate(flow_at),
    )


def _joined(arrays: Sequence[np.ndarray | None]) -> np.ndarray | None:
    present = [a for a in arrays if a is not None]
    return np.concatenate(present) if len(present) == len(arrays) else None
