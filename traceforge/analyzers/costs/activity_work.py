"""The work (FLOPs, bytes, dtype) each GPU activity did: what the roofline divides.

Every kernel gets the work of the op call that launched it
(:func:`traceforge.analyzers.costs.flops.op_work`); an op call that launched several kernels
shares its work among them in proportion to their durations. Device-to-device copies and
memsets carry their own byte counts; host-device and peer copies, communication kernels,
compiled regions, CUDA-graph replays and ops outside the model get a reason instead, so
they show up as unmodelled time rather than vanish (a replayed kernel may take the work of
the same kernel launched outside the graph: :mod:`~traceforge.analyzers.costs.replays`).
:func:`timeline` and :func:`select` give the
activities and step windows the roofline and MFU start from: the one place they touch the
shared timeline model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from traceforge.analyzers.costs.flops import op_work
from traceforge.analyzers.costs.op_calls import op_calls
from traceforge.analyzers.costs.operands import DTYPES, Work, unknown
from traceforge.analyzers.costs.replays import COMPILED, REPLAY, match_replays
from traceforge.analyzers.timeline.core import timeline as shared_timeline
from traceforge.errors import AnalysisError
from traceforge.frames import with_columns
from traceforge.model import Trace, distinct


def timeline(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """GPU activities with ``dur`` and ``step``, and the step windows.

    The one place the roofline and MFU touch the shared timeline model
    (:func:`traceforge.analyzers.timeline.core.timeline`: launching op in ``op_row``/``op_name``,
    ``step`` membership and the steps' GPU ``windows``).
    """
    tl = shared_timeline(trace)
    acts = tl.activity
    return with_columns(acts, {"dur": (acts["end"].to_numpy() - acts["ts"].to_numpy())
                               .astype(np.int64)}), tl.windows


def select(acts: pd.DataFrame, win: pd.DataFrame, steps: Sequence[int] | None,
           path: str = "") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Activities and windows of the given steps (all when None); unknown steps raise."""
    if not steps:
        return acts, win
    have = set(win["step"].tolist())
    missing = sorted(set(steps) - have)
    if missing:
        listed = ", ".join(str(s) for s in sorted(have) if s >= 0) or "none"
        raise AnalysisError(f"{path or 'trace'}: no step {missing[0]} (steps: {listed})")
    return acts[acts["step"].isin(list(steps))], win[win["step"].isin(list(steps))]


# -- work per activity -------------------------------------------------------------------
def _list_dtype(args: list[dict[str, Any]], calls: np.ndarray) -> str | None:
    """The most common floating tensor type among the ops' inputs (for TensorList args):
    ``args`` are the distinct calls' arguments, ``calls`` how many op calls made each."""
    seen: Counter[str] = Counter()
    for a, n in zip(args, calls.tolist(), strict=True):
        for t in a.get("Input type") or []:
            if t in DTYPES and DTYPES[t][0] in ("bf16", "fp16", "fp32", "fp64"):
                seen[t] += n
    return seen.most_common(1)[0][0] if seen else None


#: Ops that stand for a whole torch.compile graph; their kernels have no per-op shapes.
_COMPILED_OPS = ("Torch-Compiled Region", "CompiledFunction", "## Call CompiledFxGraph")
_COMM = "communication: bound by the interconnect, not HBM (see traceforge overlap)"


def _labels(values: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The distinct values as ``str`` gives them and each value's code into that list; a
    missing value (None, NaN) takes the code -1."""
    codes, uniq = pd.factorize(values)
    return [str(v) for v in uniq], np.asarray(codes, dtype=np.int64)


def _copy_work(name: str, kind: str, args: dict[str, Any]) -> Work:
    nbytes = args.get("bytes")
    if not isinstance(nbytes, (int, float)) or isinstance(nbytes, bool) or nbytes < 0:
        return unknown(f"{kind} without a byte count")
    if kind == "memset":
        return Work(0.0, float(nbytes), "", "memset")
    if "PtoP" not in name and ("DtoD" in name or "Device-to-Device" in name
                               or "Device -> Device" in name):
        return Work(0.0, 2.0 * nbytes, "", "copy")  # read and written in the same HBM
    return unknown("host-device or peer copy (bound by the link, not HBM)")


#: The columns :func:`activity_work` adds.
WORK_COLUMNS = ("flops", "bytes", "dtype", "family", "modelled", "reason", "op_share",
                "op_kernels")


def activity_work(trace: Trace, acts: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``acts`` (rows of the trace's timeline activity) with the work each activity did:
    flops, bytes, dtype, family, modelled, reason, op_share (its share of its op call's
    work) and op_kernels.

    The work of every activity of the trace is worked out once and memoized on the trace
    (roofline, MFU and the report each ask for it; decoding the ops' args is most of the
    cost), and ``acts`` takes its rows from it."""
    full, notes = trace.derived("roofline.activity_work", lambda: _work_columns(trace))
    rows = acts["row"].to_numpy()
    if len(rows) == len(full) and np.array_equal(rows, full["row"].to_numpy()):
        # All of the timeline's rows (roofline, MFU): its columns as they are, not copies
        # taken through an identity index (at 10M activities ~80 MB a column).
        return with_columns(acts, {c: full[c].set_axis(acts.index) for c in WORK_COLUMNS}
                            ), list(notes)
    pos = pd.Index(full["row"].to_numpy()).get_indexer(rows)
    if (pos < 0).any():  # not the timeline's rows: work them out on their own
        return _work_of(trace, acts)
    taken = {c: full[c].to_numpy()[pos] for c in WORK_COLUMNS}
    return with_columns(acts, taken), list(notes)


def _work_columns(trace: Trace) -> tuple[pd.DataFrame, list[str]]:
    """The work of every activity of the timeline: its ``row`` and :data:`WORK_COLUMNS`
    alone (what :func:`activity_work` reads; the timeline's own columns are the
    timeline's, stored once: kept here too they were 3/4 of the table, 2.5 GB at 10M
    activities written again beside the trace)."""
    out, notes = _work_of(trace, timeline(trace)[0])
    return out[["row", *WORK_COLUMNS]], notes


def _work_of(trace: Trace, acts: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    notes: list[str] = []
    n = len(acts)
    flops, nbytes = np.full(n, np.nan), np.full(n, np.nan)
    dtype, family = np.full(n, "", dtype=object), np.full(n, "", dtype=object)
    reason = np.full(n, "", dtype=object)
    share, per_op = np.full(n, np.nan), np.zeros(n, dtype=np.int64)
    kind = acts["kind"].to_numpy()
    is_k = kind == "kernel"
    op_row = acts["op_row"].to_numpy()
    cls = acts["cls"].to_numpy()
    dur = acts["dur"].to_numpy().astype(float)
    if is_k.any():
        rows = distinct(op_row[is_k & (op_row >= 0)])
        calls = op_calls(trace, rows)
        ld = _list_dtype(calls.args, calls.counts)
        per_call = [op_work(nm, a, list_dtype=ld)
                    for nm, a in zip(calls.names, calls.args, strict=True)]
        kk = pd.DataFrame({"op_row": op_row[is_k], "dur": dur[is_k]})
        g = kk.groupby("op_row")["dur"]
        tot = g.transform("sum").to_numpy()
        cnt = g.transform("count").to_numpy()
        sh = np.where(tot > 0, kk["dur"].to_numpy() / np.where(tot > 0, tot, 1), 1.0 / cnt)
        # Each kernel takes its call's work through the call's code, as arrays: a loop
        # over the kernels cost ~0.1 s per 80k of them.
        idx = np.flatnonzero(is_k)
        comm = cls[idx] == "communication"
        has = op_row[idx] >= 0
        replayed = acts["replay"].to_numpy()[idx] >= 0
        # Object arrays of the few strings, each string one object shared by its rows
        # (np.where on str makes fixed-width unicode arrays: ~110 bytes a kernel, twice,
        # on 1M kernels without ops; np.full of a str, and np.where's result, a new
        # str object per row: 73 MB at 1M).
        why_none = np.empty(int((~has).sum()), dtype=object)
        why_none.fill("no launching op in the trace")
        why_none[replayed[~has]] = REPLAY
        why_none[comm[~has]] = _COMM
        reason[idx[~has]] = why_none
        j, shj, cntj, comm = idx[has], sh[has], cnt[has], comm[has]
        code = calls.codes[np.searchsorted(rows, op_row[j])]
        share[j], per_op[j] = shj, cntj
        known = np.array([w.known for w in per_call], dtype=bool)[code]
        u = j[~known]
        if len(u):
            names, name_codes = _labels(acts["op_name"].to_numpy()[u])
            compiled = np.array([n.startswith(_COMPILED_OPS) for n in names] + [False])
            why = np.array([w.reason for w in per_call], dtype=object)[code[~known]]
            why[compiled[name_codes]] = COMPILED  # (later lines take precedence)
            why[replayed[has][~known]] = REPLAY
            why[comm[~known]] = _COMM
            reason[u] = why
        kn, c = j[known], code[known]
        flops[kn] = np.array([w.flops if w.known else 0.0 for w in per_call])[c] * shj[known]
        nbytes[kn] = np.array([w.bytes if w.known else 0.0 for w in per_call])[c] * shj[known]
        dtype[kn] = np.array([w.dtype for w in per_call] + [""], dtype=object)[c]
        family[kn] = np.array([w.family for w in per_call] + [""], dtype=object)[c]
        if any(w.known and w.family == "copy" for w in per_call) and ld:
            lists = [nm for nm in set(calls.names) if nm in ("aten::cat", "aten::stack")]
            if lists:
                notes.append(f"{', '.join(sorted(lists))}: tensor-list dtypes are not "
                             f"recorded; assumed {ld!r}, the trace's most common.")
    cp = np.flatnonzero(~is_k)
    if len(cp):
        ccodes, cuniq = trace.distinct_args(acts["row"].to_numpy()[cp], ("bytes",))
        for i, a in zip(cp, map(cuniq.__getitem__, ccodes.tolist()), strict=True):
            w = _copy_work(str(acts["name"].iat[int(i)]), str(kind[i]), a)
            reason[i] = w.reason
            if w.known:
                flops[i], nbytes[i], family[i] = w.flops, w.bytes, w.family
            share[i], per_op[i] = 1.0, 1
    out = with_columns(acts, {"flops": flops, "bytes": nbytes, "dtype": dtype,
                              "family": family, "modelled": reason == "", "reason": reason,
                              "op_share": share, "op_kernels": per_op})
    out, matched = match_replays(trace, out)
    return out, notes + matched
