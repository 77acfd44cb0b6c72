"""A ``.json.gz`` output compressed on a thread beside the code that encodes it.

zlib releases the GIL while it deflates, so the document's JSON is encoded on one core
while its gzip stream is made on another: the bytes of one ``gzip.GzipFile`` at level 6
written in order, as if compressed inline (the 288 MB trace's 252 MB of JSON take ~2.4 s
to deflate). The header holds no name and time 0: the same document gives the same file.

The thread starts only once :data:`START_BYTES` have been written, past the point where
a document's writer forks its encoding children
(:func:`traceforge.render.shared_output.write_shared` starts them after the document's
head), so no child is forked while it runs (one that were, and then waited on a lock the
thread held, would be found stalled and its part written here, as for any thread:
:mod:`traceforge.forks`). A failure
on the thread (a full disk) is raised by the next :meth:`GzipOutput.write` or by
:meth:`GzipOutput.close`.
"""

from __future__ import annotations

import gzip
import queue
import threading
from types import TracebackType
from typing import BinaryIO

#: Bytes written inline before the thread takes over (a document's head, a small file).
START_BYTES = 4 << 20
#: Pieces waiting for the thread at most (each up to 8 MiB: a batch of events, a piece
#: of a part copied in).
QUEUE_PIECES = 2


class GzipOutput:
    """Gzip of what is written, into ``f`` (level 6, no name, time 0)."""

    def __init__(self, f: BinaryIO, level: int = 6) -> None:
        self._z = gzip.GzipFile(filename="", fileobj=f, mode="wb", compresslevel=level,
                                mtime=0)
        self._q: queue.Queue[bytes | None] | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._written = 0

    def write(self, data: bytes) -> None:
        if self._error is not None:
            raise self._error
        if self._q is not None:
            self._q.put(bytes(data))
            return
        self._z.write(data)
        self._written += len(data)
        if self._written >= START_BYTES and \
                threading.current_thread() is threading.main_thread():
            self._q = queue.Queue(QUEUE_PIECES)
            self._thread = threading.Thread(target=self._run, name="traceforge-gzip",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        q = self._q
        assert q is not None
        while (data := q.get()) is not None:
            if self._error is None:
                try:
                    self._z.write(data)
                except BaseException as e:  # noqa: BLE001 - raised on the writer's thread
                    self._error = e

    def _stop(self) -> None:
        if self._q is not None and self._thread is not None:
            self._q.put(None)
            self._thread.join()
            self._q, self._thread = None, None

    def close(self) -> None:
        """Wait for the thread, then end the gzip stream (its trailer)."""
        self._stop()
        if self._error is not None:
            raise self._error
        self._z.close()

    def __enter__(self) -> GzipOutput:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:
            self._stop()  # (the output is discarded: the error is the caller's)
