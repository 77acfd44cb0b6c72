"""How the ``traceforge`` program ends (``cli.run``): without the interpreter's teardown,
but with everything an ordinary exit does that anyone can see: exit handlers run, output
flushed whole, the exit code of the command, a reader that went away is no error, and a
thread still running is waited for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO

EAGER = FIXTURES / "eager.pt.trace.json.gz"


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "TRACEFORGE_CACHE": str(tmp_path / "c")}


def _run(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code, *args], env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120)


def test_output_is_whole_and_exit_handlers_run(tmp_path: Path) -> None:
    mark = tmp_path / "atexit-ran"
    r = _run(tmp_path, f"""
        import atexit, sys
        atexit.register(lambda: open({str(mark)!r}, "w").write("yes"))
        sys.argv = ["traceforge", *sys.argv[1:]]
        from traceforge.cli import run
        run()
        """, "ops", str(EAGER), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)  # every byte of a long JSON document written
    assert mark.read_text() == "yes"


def test_exit_codes_are_the_commands(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "traceforge", "info", str(tmp_path / "none")],
                       env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    r = _run(tmp_path, """
        import sys
        import traceforge.cli as cli
        def main(): sys.exit("a message, not a number")
        cli.main = main
        cli.run()
        """)
    assert r.returncode == 1 and r.stderr == "a message, not a number\n"


def test_a_reader_that_went_away_is_no_error(tmp_path: Path) -> None:
    """``traceforge critical-path X --format json | head -c 10`` (13 MB, past any pipe
    buffer): exit 0 and nothing on stderr, no 'Exception ignored' from a flush at exit."""
    p = subprocess.Popen([sys.executable, "-m", "traceforge", "critical-path", str(EAGER),
                          "--format", "json"], env=_env(tmp_path), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(120) == 0 and err == "", err


def test_a_thread_still_running_is_waited_for(tmp_path: Path) -> None:
    mark = tmp_path / "thread-done"
    r = _run(tmp_path, f"""
        import sys, threading, time
        import traceforge.cli as cli
        def later():
            time.sleep(0.5)
            open({str(mark)!r}, "w").write("done")
        def main():
            threading.Thread(target=later).start()
            sys.exit(3)
        cli.main = main
        cli.run()
        """)
    assert r.returncode == 3, r.stderr
    assert mark.read_text() == "done"


def test_a_profiler_gets_its_profile(tmp_path: Path) -> None:
    """``python -m cProfile -o X -m traceforge ...`` writes X after the program returns:
    under a profiler the program ends the ordinary way."""
    prof = tmp_path / "tf.prof"
    r = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "traceforge",
                        "info", str(EAGER)], env=_env(tmp_path), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert prof.stat().st_size > 0


def test_numpy_imported_by_the_program_starts_one_blas_thread_without_huge_pages() -> None:
    """cli.numpy_settings: numpy imported in the block starts no OpenBLAS threads (they
    spin ~0.1 s of CPU at start) and asks for no huge pages (numpy reads
    NUMPY_MADVISE_HUGEPAGE at import); the variables are gone after it, and a user's own
    setting or numpy already imported is left alone."""
    code = (
        "import os, sys\n"
        "from traceforge import cli\n"
        "assert 'numpy' not in sys.modules\n"
        "with cli.numpy_settings():\n"
        "    assert os.environ['OPENBLAS_NUM_THREADS'] == '1'\n"
        "    import numpy\n"
        "try:\n"
        "    from numpy._core.multiarray import _get_madvise_hugepage\n"
        "except ImportError:\n"
        "    from numpy.core.multiarray import _get_madvise_hugepage\n"
        "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'),\n"
        "      _get_madvise_hugepage(), os.environ.get('NUMPY_MADVISE_HUGEPAGE'))\n"
        "with cli.numpy_settings():\n"
        "    print(os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "NUMPY_MADVISE_HUGEPAGE")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["1", "None", "False", "None", "None"]
    env["OPENBLAS_NUM_THREADS"] = "3"
    env["NUMPY_MADVISE_HUGEPAGE"] = "1"
    code = ("import os\nfrom traceforge import cli\nwith cli.numpy_settings():\n"
            "    print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['NUMPY_MADVISE_HUGEPAGE'])\n"
            "print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['NUMPY_MADVISE_HUGEPAGE'])\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["3", "1", "3", "1"]


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's mallopt")
def test_the_program_keeps_freed_memory_for_its_next_arrays() -> None:
    """cli.keep_freed_memory: an 8 MB block freed and asked for again is not mapped and
    zeroed afresh (glibc alone maps such a block on its own and unmaps it when freed);
    one of 64 MB still is (no heap is asked for more than it holds); not where the user
    tunes glibc's malloc."""
    code = (
        "import resource, sys\n"
        "from traceforge import cli\n"
        "kept = cli.keep_freed_memory() if sys.argv[1] == 'keep' else False\n"
        "def faults():\n"
        "    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "out = [kept]\n"
        "for size in (8 << 20, 64 << 20):\n"
        "    b = bytearray(size)\n"
        "    del b\n"
        "    before = faults()\n"
        "    b = bytearray(size)\n"
        "    del b\n"
        "    out.append(faults() - before)\n"
        "print(*out)\n"
    )
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}

    def run(mode: str, **extra: str) -> tuple[str, int, int]:
        out = subprocess.run([sys.executable, "-c", code, mode], env={**env, **extra},
                             capture_output=True, text=True, check=True).stdout.split()
        return out[0], int(out[1]), int(out[2])

    kept, small, big = run("keep")
    if kept == "False":
        pytest.skip("not glibc")
    assert small < 200 and big > 8000
    assert run("glibc")[1] > 1000  # (the oracle: glibc's own behaviour)
    assert run("keep", MALLOC_TOP_PAD_="131072")[0] == "False"
