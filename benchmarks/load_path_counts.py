"""How often loading a run opens and sniffs each of its files (issue 26, item 7).

    python benchmarks/load_path_counts.py [--json]

Loads a few inputs the way the verbs do (``load_run`` over the files or folder; the cache
cold, then warm; a fresh cache directory per input) and prints, per input and file:
``open`` (audit events naming the file: ``open``, ``sqlite3.connect``), ``head``
(``read_head`` calls), ``key`` (cache keys computed), ``sniff`` (sniff passes: the most
calls any one reader's ``sniff`` got for the file). Counts, not times: run it from two
checkouts (``PYTHONPATH=OTHER python benchmarks/load_path_counts.py``) to compare.
Inputs that are absent (shared fixtures) are skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TRACEFORGE_SHARED_FIXTURES", REPO.parent / "shared" / "fixtures"))

_active: list[Counter[tuple[str, str]]] = []
_watched: set[str] = set()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _active or event not in ("open", "sqlite3.connect"):
        return
    target = args[0] if args else None
    if isinstance(target, (str, bytes, os.PathLike)):
        name = os.fsdecode(target)
        if name.startswith("file:"):
            name = name[5:].split("?", 1)[0]
        if name in _watched:
            _active[-1][(name, "open")] += 1


@contextmanager
def counting(files: list[Path]) -> Iterator[Counter[tuple[str, str]]]:
    """Count opens, sniffs, head reads and cache keys of ``files`` inside the block."""
    import traceforge.formats as formats
    from traceforge.formats import cache, source

    names = {str(f) for f in files} | {str(f.resolve()) for f in files}
    c: Counter[tuple[str, str]] = Counter()
    patched: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, attr: str, what: str, arg: Callable[..., Any]) -> None:
        orig = getattr(owner, attr)

        def counted(*a: Any, **k: Any) -> Any:
            p = str(arg(*a, **k))
            if p in names:
                c[(p, what)] += 1
            return orig(*a, **k)

        patched.append((owner, attr, orig))
        setattr(owner, attr, counted)

    for name in formats.READERS:
        mod = formats._reader(name)  # noqa: SLF001 - a measuring script
        wrap(mod, "sniff", f"sniff:{name}", lambda p, *_a, **_k: p)
    for owner in (formats, source):
        if hasattr(owner, "read_head"):
            wrap(owner, "read_head", "head", lambda p, *_a, **_k: p)
    # cache keys: key_of where it exists (every key goes through it), else _key
    wrap(cache, "key_of" if hasattr(cache, "key_of") else "_key", "key", lambda p, *_a, **_k: p)
    with contextlib.suppress(ImportError):  # since the cache's split: cache.key(path)'s keys
        from traceforge.formats import cache_files

        wrap(cache_files, "key_of", "key", lambda p, *_a, **_k: p)
    _watched.clear()
    _watched.update(names)
    _active.append(c)
    try:
        yield c
    finally:
        _active.pop()
        for owner, attr, orig in reversed(patched):
            setattr(owner, attr, orig)


def per_file(c: Counter[tuple[str, str]], files: list[Path]) -> dict[str, dict[str, int]]:
    out = {}
    for f in files:
        keys = {str(f), str(f.resolve())}
        n = {w: sum(n for (p, what), n in c.items() if p in keys and what == w)
             for w in ("open", "head", "key")}
        # sniff passes: the most calls any one reader's sniff got for the file
        n["sniff"] = max((v for (p, what), v in c.items() if p in keys and what.startswith(
            "sniff:")), default=0)
        out[f.name] = n
    return out


def inputs() -> list[tuple[str, list[Path], Path]]:
    ddp = sorted((REPO / "fixtures").glob("capture_h200x2.ddp_train.sdpa.rank*.pt.trace.json.gz"))
    out = [("kineto file", [ddp[0]], ddp[0]), ("kineto 2 files", ddp, ddp[0]),
           ("kineto folder", ddp, ddp[0].parent / "h200-graphs")]
    for label, rel in (("nsys sqlite.gz", "h200-nsys/policy_fa2.sqlite.gz"),
                       ("rocpd db", "external/hpctrainingexamples/finite-difference/results.db"),
                       ("rocprofv3 folder", "external/rocprofiler-sdk")):
        if (SHARED / rel).exists():
            out.append((label, [SHARED / rel], SHARED / rel))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sys.addaudithook(_audit)
    from traceforge.formats.multirank import load_run

    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, files, arg) in enumerate(inputs()):
            os.environ["TRACEFORGE_CACHE"] = str(Path(tmp) / str(i))  # cold: an empty cache
            if label == "kineto folder":
                files = sorted(arg.glob("*.pt.trace.json.gz"))
            for state in ("cold", "warm"):
                with counting(files) as c:
                    load_run(arg if len(files) == 1 or label == "kineto folder" else files,
                             workers=1)
                result[f"{label} ({state})"] = per_file(c, files)
    if a.json:
        print(json.dumps(result, indent=1))
        return
    for case, files in result.items():
        for name, n in files.items():
            print(f"{case:26} {name[:44]:44} " + "  ".join(f"{k} {v}" for k, v in n.items()))


if __name__ == "__main__":
    main()
