"""Gzip inputs inflated by ISA-L (python-isal) or, without it, the standard library: the
same bytes and the same outcome on damaged files, the standard library as the oracle."""

from __future__ import annotations

import gzip
import sys
import zlib
from pathlib import Path

import pytest

from traceforge.errors import TraceFormatError
from traceforge.formats import gunzip

BODY = b'{"traceEvents": [' + b",".join(
    b'{"ph": "X", "name": "k%d", "ts": %d, "dur": 3}' % (i, i) for i in range(20_000)) + b"]}"


def _cases(tmp_path: Path) -> dict[str, bytes]:
    whole = gzip.compress(BODY)
    two = gzip.compress(BODY[:1000]) + gzip.compress(BODY[1000:])  # multi-member
    corrupt = bytearray(whole)
    corrupt[len(whole) // 2: len(whole) // 2 + 16] = b"\xff" * 16  # a CRC mismatch
    bad_block = bytearray(whole)
    bad_block[20:36] = b"\xff" * 16  # deflate data no inflater accepts
    return {"whole": whole, "members": two, "truncated": whole[: len(whole) // 2],
            "corrupt": bytes(corrupt), "bad block": bytes(bad_block),
            "trailing zeros": whole + b"\0" * 64,
            "trailing garbage": whole + b"garbage!", "empty member": gzip.compress(b"")}


def _outcome(path: Path) -> bytes | str:
    try:
        return b"".join(gunzip.chunks(path))
    except TraceFormatError as e:
        return str(e)


@pytest.mark.parametrize("inflater", ["isal", "zlib"])
def test_same_bytes_and_errors_as_the_standard_library(tmp_path: Path, inflater: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    if inflater == "isal":
        pytest.importorskip("isal")
    else:
        monkeypatch.setitem(sys.modules, "isal", None)  # import isal fails: gzip's path
    stdlib_opens: list[Path] = []
    real_open = gzip.open

    def spy(path: Path, mode: str = "rb") -> gzip.GzipFile:
        stdlib_opens.append(path)
        return real_open(path, mode)  # type: ignore[return-value]

    monkeypatch.setattr(gunzip.gzip, "open", spy)
    for name, data in _cases(tmp_path).items():
        p = tmp_path / f"{name.replace(' ', '-')}.json.gz"
        p.write_bytes(data)
        try:
            want: bytes | str = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            want = type(e).__name__
        got = _outcome(p)
        if isinstance(want, bytes):
            assert got == want, name
        else:
            assert isinstance(got, str), (name, got)
            with pytest.raises(TraceFormatError, match="truncated or corrupt gzip"):
                b"".join(gunzip.chunks(p))
    assert bool(stdlib_opens) == (inflater == "zlib")
