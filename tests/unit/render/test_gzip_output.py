"""GzipOutput against gzip.compress (its oracle): the same deflate stream and trailer
whether the bytes go through the thread or not, a header without a name or a time, and a
write that fails on the thread raised on the writer's."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from traceforge.cli import cli
from traceforge.render import gzip_output
from traceforge.render.gzip_output import GzipOutput

DATA = b"".join(b'{"ph": "X", "name": "kernel %d", "ts": %d, "dur": 3},' % (i, 7 * i)
                for i in range(200_000))
FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


@pytest.mark.parametrize("start", [0, 1, 10_000, 1 << 40])
@pytest.mark.parametrize("piece", [1, 4_096, 1 << 20])
def test_the_stream_gzip_compress_makes(monkeypatch: pytest.MonkeyPatch, start: int,
                                        piece: int) -> None:
    """The thread taking over at once, after a while or never; pieces of one byte to 1 MiB."""
    monkeypatch.setattr(gzip_output, "START_BYTES", start)
    data = DATA[: 300_000] if piece == 1 else DATA
    buf = io.BytesIO()
    with GzipOutput(buf) as z:
        for i in range(0, len(data), piece):
            z.write(data[i:i + piece])
    got, want = buf.getvalue(), gzip.compress(data, compresslevel=6, mtime=0)
    assert got[:3] == b"\x1f\x8b\x08" and got[3] == 0  # no name, no other field
    assert got[4:8] == b"\0\0\0\0"  # time 0: the same document, the same file
    assert got[10:] == want[10:]
    assert gzip.decompress(got) == data


class _Full(io.BytesIO):
    """A file that takes ``room`` bytes, then fails as a full disk does."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, b: bytes) -> int:  # type: ignore[override]
        if self.tell() + len(b) > self.room:
            raise OSError(28, "No space left on device")
        return super().write(b)


@pytest.mark.parametrize("start", [0, 1 << 40])
def test_a_failed_write_is_raised_on_the_writers_thread(monkeypatch: pytest.MonkeyPatch,
                                                         start: int) -> None:
    monkeypatch.setattr(gzip_output, "START_BYTES", start)
    z = GzipOutput(_Full(2_000))  # type: ignore[arg-type]
    with pytest.raises(OSError, match="No space left"):
        for i in range(0, len(DATA), 65_536):
            z.write(DATA[i:i + 65_536])
        z.close()


def test_an_error_in_the_block_stops_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gzip_output, "START_BYTES", 0)
    with pytest.raises(KeyError), GzipOutput(io.BytesIO()) as z:
        z.write(DATA[:100_000])
        raise KeyError("the encoder's")
    assert z._thread is None  # noqa: SLF001 - joined, not left waiting for more


def test_convert_json_gz_names_no_temporary_file(tmp_path: Path) -> None:
    """The file's header holds no name (a temporary file's, before) and time 0: two
    conversions of one trace are the same bytes, and the content is the .json's."""
    src = FIXTURES / "eager.pt.trace.json.gz"
    outs = [tmp_path / "a.json.gz", tmp_path / "b.json.gz", tmp_path / "c.json"]
    for out in outs:
        res = CliRunner().invoke(cli, ["convert", str(src), str(out)])
        assert res.exit_code == 0, res.output
    a, b, c = (p.read_bytes() for p in outs)
    assert a == b and a[3] == 0 and a[4:8] == b"\0\0\0\0"
    assert gzip.decompress(a) == c
