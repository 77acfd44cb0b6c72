"""One finder for nsys (capture and the .nsys-rep reader) and rocprof: fake installs in tmp."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

import traceforge as tf
from tests.conftest import shared
from traceforge import executables
from traceforge.capture.wrapper import find_profiler
from traceforge.errors import CaptureError, TraceFormatError
from traceforge.executables import NSYS, ROCPROF, find, find_nsys
from traceforge.formats.nsys import REP_MAGIC

CP = shutil.which("cp") or "/bin/cp"


def _exe(path: Path, body: str = "exit 0") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Empty vendor roots and an empty PATH: nothing found until a test installs it."""
    r = {name: tmp_path / name for name in ("opt_nvidia", "usr_local", "opt", "bin")}
    for p in r.values():
        p.mkdir()
    monkeypatch.setattr(executables, "OPT_NVIDIA", r["opt_nvidia"])
    monkeypatch.setattr(executables, "USR_LOCAL", r["usr_local"])
    monkeypatch.setattr(executables, "OPT", r["opt"])
    monkeypatch.setenv("PATH", str(r["bin"]))
    monkeypatch.delenv("TRACEFORGE_NSYS", raising=False)
    monkeypatch.delenv("TRACEFORGE_ROCPROF", raising=False)
    return r


def test_nothing_installed_is_one_line_naming_every_place(roots: dict[str, Path]) -> None:
    with pytest.raises(LookupError) as e:
        find_nsys()
    msg = str(e.value)
    assert "\n" not in msg
    for part in ("TRACEFORGE_NSYS", "--nsys", "/opt/nvidia/nsight-systems", "/usr/local/cuda",
                 "Nsight Compute"):
        assert part in msg
    with pytest.raises(CaptureError, match="rocprofv3 or rocprof not found"):
        find_profiler(ROCPROF, None)


def test_order_explicit_env_path_vendor(roots: dict[str, Path], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    vendor = _exe(roots["opt_nvidia"] / "nsight-systems" / "2024.5.1" / "bin" / "nsys")
    assert find_nsys() == str(vendor)
    on_path = _exe(roots["bin"] / "nsys")
    assert find_nsys() == str(on_path)
    env = _exe(tmp_path / "env" / "nsys")
    monkeypatch.setenv("TRACEFORGE_NSYS", str(env))
    assert find_nsys() == str(env)
    explicit = _exe(tmp_path / "explicit" / "nsys")
    assert find_nsys(str(explicit)) == str(explicit)


def test_explicit_or_env_that_is_not_executable_is_an_error(
        roots: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _exe(roots["bin"] / "nsys")
    with pytest.raises(LookupError, match="--nsys=.*not an executable nsys"):
        find_nsys(str(tmp_path / "missing"))
    plain = tmp_path / "plain"
    plain.write_text("not executable")
    monkeypatch.setenv("TRACEFORGE_NSYS", str(plain))
    with pytest.raises(LookupError, match="TRACEFORGE_NSYS=.*not an executable"):
        find_nsys()


def test_vendor_locations_newest_first(roots: dict[str, Path]) -> None:
    opt, usr = roots["opt_nvidia"], roots["usr_local"]
    ncu = _exe(opt / "nsight-compute" / "2025.1.0" / "host" / "target-linux-x64" / "nsys")
    cuda_old = _exe(usr / "cuda-12.4" / "bin" / "nsys")
    cuda_new = _exe(usr / "cuda-12.10" / "bin" / "nsys")
    assert find_nsys() == str(cuda_new)  # 12.10 is newer than 12.4: numbers, not text
    old = _exe(opt / "nsight-systems" / "2024.5.1" / "bin" / "nsys")
    new = _exe(opt / "nsight-systems" / "2024.10.2" / "target-linux-x64" / "nsys")
    flat = _exe(opt / "nsight-systems-2023.2.3" / "bin" / "nsys")
    same = _exe(opt / "nsight-systems" / "2024.5.1" / "target-linux-x64" / "nsys")
    found = executables.vendor_paths(NSYS)
    assert found[:4] == [new, old, same, flat]  # newest first; bin/ before target-linux-x64/
    assert found[-1] == ncu and found.index(cuda_new) < found.index(cuda_old)
    assert find_nsys() == str(new)
    # A file that is not executable is not a candidate.
    new.chmod(0o644)
    assert find_nsys() == str(old)
    for p in (old, same, flat):
        p.unlink()
    assert find_nsys() == str(cuda_new)
    shutil.rmtree(usr / "cuda-12.10")
    shutil.rmtree(usr / "cuda-12.4")
    assert find_nsys() == str(ncu)


def test_rocprof_in_opt_rocm(roots: dict[str, Path]) -> None:
    legacy = _exe(roots["opt"] / "rocm-6.4.0" / "bin" / "rocprof")
    assert find(ROCPROF) == str(legacy)
    v3 = _exe(roots["opt"] / "rocm-6.2.0" / "bin" / "rocprofv3")
    assert find(ROCPROF) == str(v3)  # rocprofv3 is preferred over legacy rocprof


def test_capture_and_reader_use_the_same_nsys(roots: dict[str, Path], tmp_path: Path) -> None:
    """A vendor-installed nsys exports a .nsys-rep for the reader, and capture picks it too."""
    sqlite_src = shared("external/nvfuser/8fa9ec29/report1.sqlite")
    # The fake nsys copies a real export to the path given after --output.
    nsys = _exe(roots["opt_nvidia"] / "nsight-systems" / "2025.3.1" / "bin" / "nsys",
                'while [ "$1" != "--output" ]; do shift; done\n'
                f'{CP} "{sqlite_src}" "$2"')
    assert find_profiler(NSYS, None) == str(nsys)
    rep = tmp_path / "in" / "report1.nsys-rep"
    rep.parent.mkdir()
    rep.write_bytes(REP_MAGIC + b"\0" * 64)
    before = sorted(os.listdir(rep.parent))
    t = tf.load(rep)
    assert t.meta.path == str(rep) and t.meta.extra["exported_with"] == "nsys export"
    conn = sqlite3.connect(f"file:{sqlite_src}?mode=ro", uri=True)
    n = conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    conn.close()
    assert len(t.kernels()) == n
    assert sorted(os.listdir(rep.parent)) == before  # nothing written beside the input


def test_reader_without_nsys_says_where_it_looked(roots: dict[str, Path], tmp_path: Path
                                                  ) -> None:
    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(REP_MAGIC + b"\0" * 64)
    with pytest.raises(TraceFormatError, match=r"r\.nsys-rep: an \.nsys-rep needs nsys.*"
                                               r"/opt/nvidia/nsight-systems"):
        tf.load(rep)
