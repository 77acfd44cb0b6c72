"""Link ceilings: the bus bandwidth a collective could reach on the device's links.

``traceforge/data/links.json`` holds, per device key of ``devices.json``, the per-direction
GPU-to-GPU bandwidth (NVLink, xGMI, or PCIe for PCIe cards) with its source, plus PCIe
generations and NICs. A group inside one node is held against the device's link; a group
that spans nodes against the network, which no trace names, so it has no ceiling unless
the user gives one (``--link-gbps``) or ``calibrate --comm`` measured one (a peaks file's
``allreduce_busbw_gb_s``).

Whether a group spans nodes: a rank's trace lists the GPUs of its node (Kineto
``deviceProperties``); ranks are taken to fill nodes of that many GPUs in order (rank r
on node r // G, as torchrun places them), so a group is inside one node when all its
ranks are. Where the group's ranks or the node's GPU count are not in the trace, the
topology is unknown and the note says so.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from traceforge.analyzers.costs.devices import load_peaks, match_device
from traceforge.errors import TraceFormatError
from traceforge.model import Device


@dataclass(frozen=True)
class Ceiling:
    """A ceiling in GB/s (1e9 bytes/s, one direction), what it is (``link``: "NVLink 4",
    "--link-gbps", "measured all-reduce busbw") and where the figure comes from."""

    gbps: float
    link: str
    source: str
    note: str = ""


@functools.lru_cache(maxsize=1)
def links_table() -> dict[str, Any]:
    """The shipped link table (``traceforge/data/links.json``)."""
    text = resources.files("traceforge").joinpath("data/links.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def device_link(dev: Device | None) -> Ceiling | None:
    """The intra-node link ceiling of a device, or None when traceforge has no figure."""
    if dev is None:
        return None
    peaks = match_device(dev)
    if peaks is None:
        return None
    entry = links_table()["devices"].get(peaks.key)
    if not entry:
        return None
    src = links_table()["sources"][entry["source"]]
    return Ceiling(float(entry["gb_s"]), f"{entry['link']} ({peaks.name})", str(src),
                   str(entry.get("note", "")))


def spans_nodes(ranks: Sequence[int], local_gpus: int) -> bool | None:
    """Whether a group's ranks lie on more than one node of ``local_gpus`` GPUs (ranks
    filling nodes in order), or None when unknown."""
    if not ranks or local_gpus < 1:
        return None
    return len({r // local_gpus for r in ranks}) > 1


def group_ceiling(dev: Device | None, ranks: Sequence[int], local_gpus: int, *,
                  override_gbps: float | None = None,
                  measured_gbps: float | None = None) -> tuple[Ceiling | None, str]:
    """The ceiling of one group's collectives and, when there is none, why (a note).

    ``override_gbps`` (``--link-gbps``) wins, then a measured all-reduce busbw
    (``calibrate --comm``), then the device's link for a group inside one node.
    """
    if override_gbps is not None:
        return Ceiling(override_gbps, "--link-gbps", "given by the user"), ""
    if measured_gbps is not None:
        return Ceiling(measured_gbps, "measured all-reduce busbw",
                       "traceforge calibrate --comm (peaks file)"), ""
    span = spans_nodes(ranks, local_gpus)
    if span:
        return None, ("groups span nodes (ranks beyond this node's "
                      f"{local_gpus} GPUs): the network is not in the trace, so they have "
                      "no ceiling; pass --link-gbps (e.g. 50 for a 400 Gb/s NIC per GPU)")
    link = device_link(dev)
    if link is None:
        name = dev.name if dev is not None else "an unnamed device"
        return None, f"no link figure for {name}: pass --link-gbps for % of ceiling"
    if span is None:
        return link, ("group ranks not in the trace: topology unknown, groups taken to "
                      f"be inside one node ({link.link})")
    return link, ""


#: The key ``traceforge calibrate --comm`` writes into a peaks file.
PEAKS_KEY = "allreduce_busbw_gb_s"


def measured_busbw(path: str | None) -> float | None:
    """The all-reduce busbw (GB/s) a peaks file holds (``calibrate --comm``), or None."""
    if not path:
        return None
    load_peaks(path)  # one-line errors for a missing or malformed file
    v = json.loads(Path(path).read_text("utf-8")).get(PEAKS_KEY)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise TraceFormatError(path, f"{PEAKS_KEY} = {v!r} is not a positive number")
    return float(v)
