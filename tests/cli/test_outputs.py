"""Outputs are replaced whole or not at all, and never over an input (issue 31, items 11
and 12): a failure while writing (full disk, Ctrl-C, SIGTERM) leaves the previous good
output byte for byte and no temporary file; a hard link to the input is refused."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, cli_main
from traceforge import libc, outputs

GOOD = b'{"traceEvents": []}  previous good output\n'


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _tiny_trace(tmp_path: Path) -> Path:
    from tests.hostile.test_hostile_names import write_trace

    return write_trace(tmp_path / "in.json", ["gemm_kernel"])


def test_a_write_replaces_the_file_and_keeps_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    out.write_bytes(GOOD)
    out.chmod(0o640)
    outputs.write(out, "new")
    assert out.read_text() == "new" and (out.stat().st_mode & 0o777) == 0o640
    fresh = outputs.write(tmp_path / "new.md", b"x")
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~_umask()
    assert _leftovers(tmp_path) == []


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"),
                                   KeyboardInterrupt()])
def test_an_error_mid_write_keeps_the_previous_output(tmp_path: Path,
                                                      error: BaseException) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(GOOD)
    with pytest.raises(type(error)), outputs.replacing(out) as tmp:
        tmp.write_bytes(b"half of the new")
        raise error
    assert out.read_bytes() == GOOD and _leftovers(tmp_path) == []


@pytest.mark.parametrize("verb", ["annotate", "convert", "report", "tables"])
def test_a_full_disk_leaves_each_verbs_previous_output(tmp_path: Path, verb: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a good output from before, and a disk that fills up as the new one is flushed
    src = _tiny_trace(tmp_path)
    name = {"annotate": "a.json.gz", "convert": "c.json", "report": "r.html",
            "tables": "tables/summary.csv"}[verb]
    out = tmp_path / name
    out.parent.mkdir(exist_ok=True)
    out.write_bytes(GOOD)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outputs.os, "fsync", full)
    args = {"annotate": ["annotate", str(src), "-o", str(out)],
            "convert": ["convert", str(src), str(out)],
            "report": ["report", str(src), "-o", str(out)],
            "tables": ["idle", str(src), "--format", "csv", "-o", str(out.parent)]}[verb]
    code, _, err = cli_main(*args)
    # THEN one line naming the file, exit 2, the old output intact, no temporary file
    assert code == 2 and "No space left on device" in err and err.count("\n") == 1, err
    assert out.read_bytes() == GOOD
    assert _leftovers(out.parent) == []


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_sigterm_during_a_write_keeps_the_previous_output(tmp_path: Path, sig: str) -> None:
    out = tmp_path / "report.html"
    out.write_bytes(GOOD)
    # (The signal's default action first: a runner started under nohup passes SIGHUP on
    # ignored, and an ignored signal is left ignored.)
    code = textwrap.dedent(f"""
        import os, signal
        signal.signal(signal.{sig}, signal.SIG_DFL)
        from traceforge import outputs
        with outputs.replacing({str(out)!r}) as tmp:
            tmp.write_bytes(b"half")
            os.kill(os.getpid(), signal.{sig})
            tmp.write_bytes(b"never")
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60)
    assert r.returncode == 128 + getattr(signal, sig), r.stderr
    assert out.read_bytes() == GOOD and _leftovers(tmp_path) == []


def test_an_in_process_run_leaves_sigterm_as_it_found_it() -> None:
    """main() unwinds on SIGTERM while it runs; called in process (a notebook, a test) it
    hands the default back, else a pool forked later by the caller inherits a handler that
    turns SIGTERM into SystemExit and Pool.terminate can wait on it for ever."""
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    code, _, _ = cli_main("--help")
    assert code == 0 and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    code, _, _ = cli_main("info", "/no/such/trace.json")
    assert code == 2 and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


@pytest.mark.parametrize("verb", ["annotate", "convert", "report"])
def test_a_hard_link_to_the_input_is_refused(tmp_path: Path, verb: str) -> None:
    src = tmp_path / "in.json"
    src.write_bytes(_tiny_trace(tmp_path).read_bytes())
    before = src.read_bytes()
    # the check is on the file, not its name: a report "link.md" is the input trace
    link = tmp_path / ("link.json" if verb != "report" else "link.md")
    os.link(src, link)
    args = {"annotate": ["annotate", str(src), "-o", str(link)],
            "convert": ["convert", str(src), str(link)],
            "report": ["report", str(src), "-o", str(link)]}[verb]
    code, _, err = cli_main(*args)
    assert code == 2 and "name another output" in err and err.count("\n") == 1, err
    assert src.read_bytes() == before and src.stat().st_nlink == 2


def test_a_streamed_output_is_sent_to_the_disk_as_it_grows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every WRITEBACK_BYTES written (by write, or by a kernel copy its writer then seeks
    past) the disk is asked to start on them, each range once, in order; the bytes are
    those written, and the file is not opened to be truncated (ext4 flushes such a file
    whole when it is closed)."""
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(outputs, "WRITEBACK_BYTES", 1000)
    monkeypatch.setattr(outputs, "start_writeback",
                        lambda fd, at, size: sent.append((at, size)))
    flags: list[int] = []
    real_open = os.open

    def spy(path: str, fl: int, *a: int) -> int:
        flags.append(fl)
        return real_open(path, fl, *a)

    monkeypatch.setattr(outputs.os, "open", spy)
    src = tmp_path / "part"
    src.write_bytes(b"k" * 2500)
    out = tmp_path / "out.bin"
    with outputs.replacing(out) as tmp, outputs.opened(tmp) as f:
        f.write(b"a" * 700)
        f.write(b"b" * 700)  # (buffered: reaches the file with the next big write)
        f.write(b"c" * 9000)
        f.flush()
        to = f.tell()
        # (as append_file adds a helper's part: the kernel writes, the writer seeks past)
        os.pwrite(f.fileno(), src.read_bytes(), to)
        f.seek(to + 2500)
        f.write(b"d" * 10)
    assert out.read_bytes() == b"a" * 700 + b"b" * 700 + b"c" * 9000 + b"k" * 2500 + b"d" * 10
    assert flags and not any(fl & os.O_TRUNC for fl in flags)
    assert sent == [(0, 1400), (1400, 9000), (10400, 2500)]  # the copy too; the last 10 not


def test_writeback_where_the_call_is_missing_or_refused(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """No sync_file_range (not Linux): nothing asked, the bytes all there; a descriptor the
    call refuses (a pipe) is no error."""
    monkeypatch.setattr(libc, "_found", {"sync_file_range": None})
    monkeypatch.setattr(outputs, "WRITEBACK_BYTES", 10)
    out = tmp_path / "o.bin"
    with outputs.replacing(out) as tmp, outputs.opened(tmp) as f:
        f.write(b"x" * 100)
    assert out.read_bytes() == b"x" * 100
    monkeypatch.setattr(libc, "_found", {})
    r, w = os.pipe()
    try:
        outputs.start_writeback(w, 0, 100)
    finally:
        os.close(r)
        os.close(w)
