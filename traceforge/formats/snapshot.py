"""PyTorch CUDA memory snapshots (``torch.cuda.memory._dump_snapshot``), read as data only.

A snapshot pickle holds plain containers: ``segments`` (the caching allocator's segments,
each with its ``blocks``), ``device_traces`` (per device, the recorded alloc/free/segment
actions with ``time_us`` and stack ``frames``) and ``allocator_settings``. It is read with
the standard library's unpickler restricted to those: every global (a class, a function,
``__reduce__`` of any object) is refused, so a crafted file can never run code here; the
refusal is one line naming the file.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

from traceforge.errors import TraceFormatError

#: The first bytes of a pickle of protocol 2 and later.
MAGIC = b"\x80"
#: Larger files are refused before reading (a snapshot of 1M trace entries is ~1 GB).
MAX_BYTES = 8 * 2**30


class _DataOnly(pickle.Unpickler):
    """Builtin containers and scalars only (no ``find_class``, no persistent ids)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused {module}.{name}: a snapshot is data, not code")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused a persistent id: a snapshot is data, not code")


def sniff(path: Path, head: bytes) -> bool:
    """A pickle (protocol 2+) or a ``.pickle``/``.pkl`` name."""
    return head[:1] == MAGIC or path.suffix.lower() in (".pickle", ".pkl")


def read(path: str | Path) -> dict[str, Any]:
    """The snapshot in ``path`` as plain dicts and lists; TraceFormatError (one line) for
    anything else: a missing, truncated or damaged file, objects, the wrong schema."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise TraceFormatError(p, f"snapshot of {size / 2**30:.1f} GiB is too large")
        raw = p.read_bytes()
    except FileNotFoundError:
        raise TraceFormatError(p, "no such file") from None
    except OSError as e:
        raise TraceFormatError(p, f"cannot read ({e.strerror})") from None
    if not raw:
        raise TraceFormatError(p, "empty file")
    try:
        obj = _DataOnly(io.BytesIO(raw)).load()
    except pickle.UnpicklingError as e:
        msg = str(e)
        if "refused" in msg:
            raise TraceFormatError(p, f"not a plain memory snapshot ({msg})") from None
        raise TraceFormatError(p, f"damaged pickle ({msg})") from None
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            MemoryError, RecursionError, OverflowError, UnicodeError) as e:
        what = "truncated pickle" if isinstance(e, EOFError) else "damaged pickle"
        raise TraceFormatError(p, f"{what} ({type(e).__name__}: {e})"[:300]) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("segments"), list):
        raise TraceFormatError(p, "a pickle, but not a PyTorch memory snapshot (no segments "
                               "list; write one with torch.cuda.memory._dump_snapshot)")
    traces = obj.get("device_traces")
    if traces is not None and not isinstance(traces, list):
        raise TraceFormatError(p, "snapshot device_traces is not a list")
    return obj
