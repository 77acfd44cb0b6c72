"""The ``traceforge`` command line: parse, call the library, render, exit.

Each verb lives in its own small module under ``traceforge/commands/`` and is listed once
in :data:`COMMANDS`. Only :func:`main` maps ``TraceforgeError`` to exit codes and one-line
messages on stderr (2: bad input or usage, 1: other failures).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import click

from traceforge import background, errors, libc
from traceforge.commands import values
from traceforge.errors import TraceforgeError

#: Modules under traceforge.commands, each exposing a click command named ``command``.
COMMANDS: tuple[str, ...] = (
    "top_kernels",
    "ops",
    "info",
    "convert",
    "capture",
    "diff",
    "open",
    "report",
    "annotate",
    "idle",
    "overlap",
    "breakdown",
    "launch",
    "cache",
    "sql",
    "roofline",
    "mfu",
    "calibrate",
    "critical_path",
    "scaling",
    "compare",
    "memory",
    "comm",
)


class _LazyGroup(click.Group):
    """Imports a verb's module only when that verb runs.

    A cold ``traceforge top-kernels`` then pays for what top-kernels needs, not for the
    HTTP server, report templates or capture machinery of other verbs; ``traceforge
    --help`` lists the verbs from their docstrings, read from the modules' source with
    :mod:`ast`, and imports none of them.
    """

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing (the same rows, widths and truncation), over stand-ins."""
        rows = [(name, listing(name) or self.get_command(ctx, name))
                for name in self.list_commands(ctx)]
        shown = [(name, cmd) for name, cmd in rows if cmd is not None and not cmd.hidden]
        if shown:
            limit = formatter.width - 6 - max(len(name) for name, _ in shown)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit))
                                    for name, cmd in shown])

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n.replace("_", "-") for n in COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        mod = cmd_name.replace("-", "_")
        if mod not in COMMANDS:
            return None
        command: click.Command = importlib.import_module(f"traceforge.commands.{mod}").command
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        """A mistyped verb gets a did-you-mean; a trace named without a verb, the verbs
        that read one."""
        name = args[0] if args else ""
        if name in TRACE_VERBS and "numpy" not in sys.modules:  # (the program: see below)
            keep_freed_memory()
        with numpy_settings(name in TRACE_VERBS):
            if (name in TRACE_VERBS and not ctx.resilient_parsing
                    and not ctx.params.get("no_cache")):
                _prefetch(args[1:], name)
            if (name and not name.startswith("-") and not ctx.resilient_parsing
                    and self.get_command(ctx, name) is None):
                raise click.UsageError(
                    f"No such command {name!r}. {_unknown_verb(ctx, name)}", ctx)
            return super().resolve_command(ctx, args)


#: What numpy is imported with for a verb that reads traces (:func:`numpy_settings`).
NUMPY_SETTINGS = {"OPENBLAS_NUM_THREADS": "1", "NUMPY_MADVISE_HUGEPAGE": "0"}


@contextlib.contextmanager
def numpy_settings(wanted: bool = True) -> Iterator[None]:
    """numpy imported inside this block starts one OpenBLAS thread, not one per core, and
    does not ask the kernel for huge pages.

    OpenBLAS starts its threads when numpy is imported, and they spin for ~0.1 s of CPU
    (on a 2-core machine, beside a cold command's parse workers); the verbs do no BLAS
    work. numpy asks for transparent huge pages for each array of 4 MB or more
    (``madvise``): where the kernel has no free huge page at hand it compacts memory
    first, in the process that touched the page, and a verb's arrays are new memory
    touched once (a cold ``top-kernels`` of the 226 MB Nsight Systems export: 6.0 ->
    4.8 s, system time 3.2 -> 1.8 s). Each variable only where numpy is not imported yet
    (the program, not a notebook or a test that calls :func:`main`) and the user has not
    set it; those set are removed again at the end, so no program a verb runs inherits
    them (and ``capture``/``calibrate``, which run workloads, never set them)."""
    if not wanted or "numpy" in sys.modules:
        yield
        return
    mine = [k for k in NUMPY_SETTINGS if k not in os.environ]
    os.environ.update({k: NUMPY_SETTINGS[k] for k in mine})
    try:
        yield
    finally:
        for k in mine:
            os.environ.pop(k, None)


#: glibc's ``mallopt`` parameters (``malloc.h``).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: Blocks from this size up get a mapping of their own (glibc's largest dynamic threshold).
MMAP_BYTES = 32 << 20
#: Free memory at the top of a heap is handed back beyond this much.
TRIM_BYTES = 64 << 20


def keep_freed_memory() -> bool:
    """This process keeps the memory it frees for its later blocks of up to 32 MiB
    (glibc's ``mallopt``: blocks from :data:`MMAP_BYTES` up mapped on their own, free
    memory at a heap's top kept up to :data:`TRIM_BYTES`); whether it could.

    By default glibc maps each block from 128 KiB up on its own and unmaps it when it is
    freed (raising that size, up to 32 MiB, only as it frees larger ones), and hands a
    heap's free top back beyond twice it: a verb that builds and drops arrays of a few
    MB one after another (a batch of packets, a column's pieces) has the kernel zero and
    map fresh pages for each. Fixed, they are reused; a few percent at most (runs in
    alternating order against the same tree without it: ``convert`` of the 288 MB
    Kineto trace faster in 6 of 8, by 0.07 s of 3.25; its cold ``report`` in 3 of 4, by
    0.05 s of 3.9; a cold ``top-kernels`` of the 226 MB Nsight Systems export in 4 of 6,
    by 0.13 s of 5.1; peak memory +17, +16 and +90 MB). Blocks are still mapped from 32
    MiB up, so no thread's heap (64 MiB) is asked for more than it can hold. The
    program calls it for the verbs that read traces (not a notebook or a test that
    calls :func:`main`: their process lives on), and not where the user tunes glibc's
    malloc (``MALLOC_*``, ``GLIBC_TUNABLES``); forked workers inherit it, programs a
    verb runs do not."""
    if "GLIBC_TUNABLES" in os.environ or any(k.startswith("MALLOC_") for k in os.environ):
        return False
    mallopt = libc.function("mallopt", "c_int", "c_int") if libc.is_glibc() else None
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_BYTES)) & bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES))


#: Verbs that read traces: a prefetch may start decoding theirs before their modules are
#: imported, and numpy is imported for them as :func:`numpy_settings` says.
TRACE_VERBS = frozenset(n.replace("_", "-") for n in COMMANDS) - {"cache", "calibrate",
                                                                  "capture"}


def _prefetch(args: list[str], verb: str = "") -> None:
    """Where the words after the verb name one file (and no other word is a file: several
    traces are read by the engine's workers; an output does not count: a file after
    ``-o``/``--output``, or ``convert``'s OUT, which may exist from an earlier run), have
    its chunks decoded while the verb's modules are imported
    (:mod:`traceforge.formats.prefetch`)."""
    outputs = {i + 1 for i, a in enumerate(args) if a in ("-o", "--output")}
    words = [i for i, a in enumerate(args) if i not in outputs and not a.startswith("-")]
    if verb == "convert" and len(words) == 2:
        outputs.add(words[1])  # (convert IN OUT)
    files = [args[i] for i in words if i not in outputs and os.path.isfile(args[i])]
    if len(files) == 1:
        from traceforge.formats import prefetch

        prefetch.start(files[0])


def _unknown_verb(ctx: click.Context, name: str) -> str:
    import difflib

    verbs = cli.list_commands(ctx)
    close = difflib.get_close_matches(name.replace("_", "-"), verbs, n=3, cutoff=0.6)
    if close:
        return "Did you mean " + " or ".join(f"'{v}'" for v in close) + "?"
    if name.startswith("sample:") or os.path.exists(name):
        return (f"To look at a trace, name a verb first: traceforge info {name}, "
                f"traceforge top-kernels {name}")
    return "Verbs: " + ", ".join(verbs)


def _no_such_option(e: click.NoSuchOption) -> str:
    """click's message, suggesting only options the command shows (not hidden ones)."""
    import difflib

    if e.ctx is None:
        return e.format_message()
    opts = [o for p in e.ctx.command.get_params(e.ctx) if isinstance(p, click.Option)
            and not p.hidden for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
    close = difflib.get_close_matches(e.option_name, opts, n=3, cutoff=0.6)
    hint = (" Did you mean " + " or ".join(f"'{o}'" for o in close) + "?") if close else ""
    return f"No such option {e.option_name!r}.{hint}"


def listing(name: str) -> click.Command | None:
    """A stand-in for verb ``name`` carrying the docstring of its module's ``command``
    function (what click's help shows), or None where the source does not say it simply
    (then the module is imported). tests/quality/test_startup.py checks they agree."""
    import ast

    path = Path(__file__).with_name("commands") / f"{name.replace('-', '_')}.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "command":
            doc = ast.get_docstring(node, clean=False)
            made = " ".join(ast.unparse(d) for d in node.decorator_list
                            if ast.unparse(d).startswith(("click.command", "click.group")))
            if doc is None or not made or "help=" in made or "hidden=" in made:
                return None
            return click.Command(name, help=doc)
    return None


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="traceforge")
@click.option("--no-cache", is_flag=True,
              help="Parse traces from scratch and write no cache entry "
              "(also TRACEFORGE_NO_CACHE=1).")
@click.option("--cache-size", metavar="SIZE", callback=values.check_size,
              help="Cap on the cache directory, e.g. 5GB (default; also "
              "TRACEFORGE_CACHE_SIZE); least recently used entries are evicted.")
@click.option("--max-memory", metavar="SIZE",
              help="End the run with one line once it (with its workers) uses more memory "
              "than SIZE, e.g. 8GB (also TRACEFORGE_MAX_MEMORY; default 90% of the memory "
              "available at start; 0 turns the guard off).")
@click.option("--width", type=values.WIDTH, default=None, metavar="N", expose_value=False,
              callback=values.set_width, is_eager=True,
              help="Fit tables in N columns (default: the terminal's; unlimited when "
              "piped or redirected; also TRACEFORGE_WIDTH).")
@click.option("-q", "--quiet", is_flag=True,
              help="No progress display on stderr (it shows only when stderr is a "
              "terminal; also TRACEFORGE_QUIET=1).")
@click.pass_context
def cli(ctx: click.Context, no_cache: bool, cache_size: str | None,
        max_memory: str | None, quiet: bool) -> None:
    """Analyze GPU traces of ML workloads: Kineto JSON, Nsight Systems, rocprof, Perfetto.

    Parsed traces are cached as Arrow files in $TRACEFORGE_CACHE (default
    ~/.cache/traceforge), so later commands on the same file skip parsing; see
    `traceforge cache info`. Large Kineto files are parsed on every core
    (TRACEFORGE_PARSE_WORKERS=N caps the processes; 1: one).
    """
    # Environment variables, not globals: worker processes of multi-rank verbs inherit them.
    # They are restored when the command ends (the CLI also runs in-process, in tests).
    from traceforge import limits

    try:
        limit = limits.parse_limit(max_memory or os.environ.get("TRACEFORGE_MAX_MEMORY"))
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--max-memory") from None
    stop = limits.guard(limit)
    if stop is not None:
        ctx.call_on_close(stop.set)
    settings = {"TRACEFORGE_NO_CACHE": "1" if no_cache else None,
                "TRACEFORGE_CACHE_SIZE": cache_size,
                "TRACEFORGE_QUIET": "1" if quiet else None}
    for var, value in settings.items():
        if value is None:
            continue
        old = os.environ.get(var)
        os.environ[var] = value
        ctx.call_on_close(lambda var=var, old=old: _restore(var, old))


def _restore(var: str, old: str | None) -> None:
    if old is None:
        os.environ.pop(var, None)
    else:
        os.environ[var] = old


def _discard() -> None:
    """Stop a prefetch the command did not claim (only where one was started)."""
    prefetch = sys.modules.get("traceforge.formats.prefetch")
    if prefetch is not None:
        prefetch.discard()


def _terminated(signum: int, frame: Any) -> None:
    """SIGTERM ends the run as an exit does: ``finally`` blocks and ``atexit`` hooks run,
    so temporary files (a decompressed database, a half-written output) are removed."""
    errors.TERMINATED.append(signum)
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> Any:
    """Run the CLI; errors become one line on stderr and an exit code, never a traceback."""
    installed = (threading.current_thread() is threading.main_thread()
                 and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
    if installed:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        return _run(argv)
    finally:
        # Called in process (a notebook, a test), the caller's SIGTERM handling comes back:
        # a process forked from it later (a multiprocessing pool) must die on SIGTERM.
        if installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run(argv: list[str] | None) -> Any:
    try:
        # A new cache entry is written beside the command, waited for at its end.
        with background.settling():
            try:
                return cli.main(args=argv, prog_name="traceforge", standalone_mode=False)
            finally:
                _discard()
    except TraceforgeError as e:
        from traceforge.commands.options import say

        say(f"traceforge: error: {e}")
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("traceforge: aborted", err=True)
        sys.exit(130)
    except click.UsageError as e:
        # One line, like every other input error (click's own form takes four).
        where = e.ctx.command_path if e.ctx is not None else "traceforge"
        text = _no_such_option(e) if isinstance(e, click.NoSuchOption) else e.format_message()
        msg = " ".join(text.split())
        click.echo(f"traceforge: error: {msg} (see `{where} -h`)", err=True)
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except KeyboardInterrupt:
        click.echo("traceforge: interrupted", err=True)
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - last resort: one line, not a traceback
        if os.environ.get("TRACEFORGE_DEBUG"):
            raise
        click.echo(
            f"traceforge: internal error: {type(e).__name__}: {e} "
            "(set TRACEFORGE_DEBUG=1 for a traceback, and please report it)",
            err=True,
        )
        sys.exit(1)


def run() -> NoReturn:
    """The ``traceforge`` program (``python -m traceforge`` too): :func:`main`, then
    :func:`end` with its exit code."""
    try:
        main()
        code: object = 0
    except SystemExit as e:
        code = e.code
    end(code)


def end(code: object = 0) -> NoReturn:
    """End this process as the program does: without tearing the interpreter down. That
    teardown frees every module and object one by one (~0.1 s once pandas and pyarrow are
    loaded) for nothing once the output is written: exit handlers run and the standard
    streams are flushed first, as at an ordinary exit, and ``code`` is read as
    ``sys.exit`` reads it. Where another thread still runs, the ordinary exit (it waits
    for that thread); also under a profiler or tracer (``python -m cProfile -m
    traceforge`` writes its profile after the program returns)."""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)  # as Python prints a non-integer exit code
        code = 1
    if sys.getprofile() is not None or sys.gettrace() is not None or any(
            t.is_alive() and not t.daemon for t in threading.enumerate()
            if t is not threading.current_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # A reader that went away (| head), a closed stream: nothing more to say.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
