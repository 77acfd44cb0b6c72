"""What ran on a GPU stream before a given moment: the activities of each stream in
issue order, and the query "which activity on these streams ended last, launched before
t and ended by t'".

Launch, graph-replay, stream-wait and blocking-sync edges all ask that one question, of
the same table, so it is answered once here.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd


def stream_table(acts: pd.DataFrame) -> pd.DataFrame:
    """Activities by stream in issue order, with a monotone launch key and end."""
    lkey = np.where(acts["launch_ts"].to_numpy() >= 0, acts["launch_ts"].to_numpy(),
                    acts["ts"].to_numpy())
    s = pd.DataFrame({"act": np.arange(len(acts), dtype=np.int64),
                      "device": acts["device"].to_numpy(), "stream": acts["stream"].to_numpy(),
                      "ts": acts["ts"].to_numpy(), "end": acts["end"].to_numpy(),
                      "replay": acts["replay"].to_numpy(), "lkey": lkey})
    s = s.sort_values(["device", "stream", "ts"], kind="stable").reset_index(drop=True)
    g = s.groupby(["device", "stream"], sort=False)
    # A stream runs in launch order, so "launched before t" and "ended by t" are prefixes.
    s["lkey"] = g["lkey"].cummax()
    s["endc"] = g["end"].cummax()
    s["pos"] = g.cumcount().astype(np.int64)
    return cast("pd.DataFrame", s)


def _no_answer() -> pd.DataFrame:
    return cast("pd.DataFrame", pd.DataFrame({"qid": [], "act": [], "end": []}, dtype=np.int64))


def last_on_streams(s: pd.DataFrame, q: pd.DataFrame) -> pd.DataFrame:
    """For each query (qid, device, stream, not_stream, t_launch, t_end), the activity that
    ended last among those on the matching streams (device/stream -1: any) launched before
    ``t_launch`` and ended by ``t_end``. Returns qid, act, end (one row per answered qid)."""
    if q.empty or s.empty:
        return _no_answer()
    pairs = s[["device", "stream"]].drop_duplicates()
    x = q.merge(pairs.rename(columns={"device": "d", "stream": "s"}), how="cross")
    ok = ((x["device"] < 0) | (x["device"] == x["d"])) & ((x["stream"] < 0) |
                                                         (x["stream"] == x["s"]))
    x = x[ok.to_numpy() & (x["s"] != x["not_stream"]).to_numpy()]
    x = x.drop(columns=["device", "stream"]).rename(columns={"d": "device", "s": "stream"})
    if x.empty:
        return _no_answer()
    x = x.reset_index(drop=True)
    x["k"] = np.arange(len(x))
    by = ["device", "stream"]
    a = pd.merge_asof(x.sort_values("t_launch"), s[[*by, "lkey", "pos"]].sort_values("lkey"),
                      left_on="t_launch", right_on="lkey", by=by, direction="backward",
                      allow_exact_matches=False)
    b = pd.merge_asof(x.sort_values("t_end"), s[[*by, "endc", "pos"]].sort_values("endc"),
                      left_on="t_end", right_on="endc", by=by, direction="backward")
    p1 = a.set_index("k")["pos"].reindex(x["k"]).to_numpy()
    p2 = b.set_index("k")["pos"].reindex(x["k"]).to_numpy()
    pos = np.fmin(p1, p2)
    pos = np.where(np.isnan(p1) | np.isnan(p2), np.nan, pos)
    x["pos"] = pos
    x = x.dropna(subset=["pos"]).astype({"pos": np.int64})
    x = x.merge(s[[*by, "pos", "act", "end"]], on=[*by, "pos"])
    if "replay" in q.columns:
        x = x.merge(s[["act", "replay"]].rename(columns={"replay": "src_replay"}), on="act")
        x = x[x["src_replay"] == x["replay"]]
    x = x.sort_values(["qid", "end"], kind="stable").drop_duplicates("qid", keep="last")
    return cast("pd.DataFrame", x[["qid", "act", "end"]].astype(np.int64))
