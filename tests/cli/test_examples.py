"""Every command the README and the verbs' --help show runs (collected, not listed by hand).

Commands are collected from the README's fenced code blocks (``$ traceforge ...`` lines,
continued with ``\\`` or inside quotes, and shell lines joined with ``&&``), its inline code spans
(```traceforge VERB ...```) and every verb's --help text, so a new example is tested
without anyone adding it here. Each runs in process, in a temporary folder where the
files it names exist: the trace paths of the examples (``run.pt.trace.json.gz``,
``policy.sqlite``, ``runs/ddp/``, a ``sweep`` folder, ...) are materialized there from the
repository's fixtures by their names' endings (:func:`materialize`). A synopsis
(``traceforge idle TRACE [--min-gap-us X]``) or a span that names too little to run
(``traceforge roofline --by kernel``) is checked for its verb and options instead.
The README's notebook block runs too. Verbs that need a GPU, a browser or a script to
profile are listed in :data:`NOT_RUN`, with why.
"""

from __future__ import annotations

import gzip
import json
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from tests.conftest import FIXTURES, REPO, SHARED, cli_main

README = REPO / "README.md"

#: Verbs whose examples are not run here, and why (their options are still checked).
NOT_RUN = {
    "capture": "runs a script under a profiler (torch and, for the examples, a GPU); "
               "tests/unit/capture/test_capture*.py run it on stand-in scripts",
    "open": "serves the trace to a browser and waits for it to fetch (tests/unit/ui/test_open.py)",
    "calibrate": "measures the GPU's matmul and copy rates (needs CUDA or ROCm)",
}

EAGER = FIXTURES / "eager.pt.trace.json.gz"
DDP = [FIXTURES / f"capture_h200x2.ddp_train.sdpa.rank{r}.pt.trace.json.gz" for r in (0, 1)]
NSYS = SHARED / "h200-nsys" / "policy_fa2.sqlite.gz"
#: Options whose value is a file the command writes (never materialized).
OUTPUT_OPTIONS = frozenset({"-o", "--output", "--report", "--chart"})
_TRACE_END = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".sqlite")


@dataclass(frozen=True)
class Example:
    """One command as written, where it was found, and whether it is a synopsis."""

    where: str
    text: str
    inline: bool = False

    @property
    def argv(self) -> list[str]:
        words = shlex.split(self.text, comments=True)
        assert words[0] == "traceforge", self
        return words[1:]


def _commands_in(line: str) -> list[str]:
    line = line.strip().removeprefix("$ ").strip()
    return [part.strip() for part in line.split("&&")
            if part.strip().startswith("traceforge ")]


def readme_examples(text: str) -> list[Example]:
    """The ``traceforge`` commands of a Markdown text: fenced shell lines, inline spans."""
    out: list[Example] = []
    fence: str | None = None
    pending = ""
    start = 0
    for no, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            continue
        if fence is None:
            for span in re.findall(r"`(traceforge [^`]+)`", line):
                out.append(Example(f"README.md:{no}", span.replace("\\|", "|"), inline=True))
            continue
        if fence not in ("", "console", "bash", "sh", "shell", "text"):
            continue
        if pending:
            pending += " " + line.strip()
        else:
            start, pending = no, line
        if pending.rstrip().endswith("\\"):
            pending = pending.rstrip()[:-1]
            continue
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # a quoted argument (SQL) goes on on the next line
            continue
        out += [Example(f"README.md:{start}", c) for c in _commands_in(pending)]
        pending = ""
    return out


def help_examples() -> list[Example]:
    """The ``traceforge`` commands of every verb's help text: the lines of its verbatim
    (``\\b``) paragraphs and those after ``Example:``."""
    import inspect

    from traceforge.cli import cli

    out = []
    ctx = _root()
    for verb in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, verb)
        assert cmd is not None
        verbatim = False
        pending = ""
        for line in inspect.cleandoc(f"{cmd.help or ''}\n\n{cmd.epilog or ''}").splitlines():
            text = line.strip()
            verbatim = (verbatim and bool(text)) or text == "\b"
            if pending:
                pending += " " + text
            elif text.startswith("Example: traceforge ") or (
                    verbatim and text.startswith("traceforge ")):
                pending = text.removeprefix("Example: ")
            else:
                continue
            try:
                shlex.split(pending)
            except ValueError:
                continue
            out.append(Example(f"traceforge {verb} --help", pending))
            pending = ""
    return out


def python_blocks(text: str) -> list[tuple[str, str]]:
    """(where, code) of the README's Python blocks that use traceforge."""
    blocks = re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    return [(f"README.md:{text[:m.start()].count(chr(10)) + 1}", m.group(1))
            for m in blocks if "import traceforge" in m.group(1)]


def _is_synopsis(ex: Example) -> bool:
    """A usage line with placeholders (TRACE, A B, [--opt X], a|b, ...), not a command."""
    return any(w.isupper() and len(w) > 0 and w.isalpha() or w.startswith("[") or "|" in w
               or "..." in w for w in re.split(r"[\s=]+", ex.text)[1:] if w)


def _root() -> click.Context:
    """The CLI's own root context (its settings: -h as well as --help). A context made
    without them would cache a help option without -h on the verb's command object."""
    from traceforge.cli import cli

    return click.Context(cli, info_name="traceforge", **cli.context_settings)


def _verb(argv: list[str]) -> tuple[click.Command, list[str], list[str]]:
    """The click command an argv runs, the words naming it, and its own arguments."""
    from traceforge.cli import cli

    cmd: click.Command = cli
    path: list[str] = []
    rest = list(argv)
    while isinstance(cmd, click.Group):
        while rest and rest[0].startswith("-"):  # group options (--no-cache)
            rest = rest[1:] if rest[0] != "--cache-size" else rest[2:]
        if not rest or rest[0].isupper():
            break
        sub = cmd.get_command(click.Context(cmd), rest[0])
        assert sub is not None, f"no verb {rest[0]!r}"
        cmd, path, rest = sub, [*path, rest[0]], rest[1:]
    return cmd, path, rest


def _check_options(ex: Example) -> None:
    """A synopsis's verb exists and takes every option it names."""
    words = [w for w in re.split(r"[\s\[\]|]+", ex.text) if w and "..." not in w][1:]
    cmd, path, _ = _verb([w for w in words if not w.isupper()][:3])
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
    from traceforge.cli import cli

    known |= {o for p in cli.params for o in p.opts} | {"--help", "-h"}
    for w in words:
        opt = w.split("=")[0]
        if opt.startswith("-") and opt != "--":
            assert opt in known, f"{ex.where}: `{ex.text}`: {' '.join(path)} has no {opt}"
        if opt == "--":
            break


def _runnable(ex: Example) -> bool:
    """Whether the command names everything its verb needs (else it is a mention)."""
    if ex.inline and _is_synopsis(ex):
        return False
    cmd, _, rest = _verb(ex.argv)
    if isinstance(cmd, click.Group):
        return False
    try:
        cmd.make_context(cmd.name or "", list(rest), parent=_root()).close()
    except click.MissingParameter:
        return False
    except click.UsageError:
        return True  # a real error: running it shows it
    return True


def _write_sweep(root: Path) -> None:
    n2 = root / "n2"
    n2.mkdir(parents=True)
    for p in DDP:
        shutil.copy(p, n2 / p.name)
    (root / "sweep.summary.json").write_text(json.dumps(
        {"runs": [{"gpus": 2, "folder": "n2", "mode": "sdpa"}]}))


MEMORY = FIXTURES / "capture_h100.memory_train.both.pt.trace.json.gz"


def materialize(word: str, cwd: Path, verb: str = "") -> None:
    """Make the input file or folder an example names, from the fixtures, by its name.

    Kineto names whose stem is a fixture's (``compiled``, ``eager``, ``train`` for the
    two-GPU training run) get that fixture, any other JSON the eager run; ``.sqlite``
    the nsys export (skipped where the shared fixtures are absent); for the ``memory``
    verb a trace with memory events (a folder: two ranks of it), and ``*.memory.pickle``
    its allocator snapshot; a
    folder (a path with ``/`` and no trace ending) a two-rank DDP run; ``sweep`` a sweep
    (capture --nproc) folder; ``peaks.json`` a calibrate output. A path the repository
    has (``fixtures/...``) is that file.
    """
    target = cwd / word
    if word.startswith(("sample:", "-")) or target.exists():
        return
    name = Path(word).name
    if (REPO / word).exists():  # a file of the repository (fixtures/...): itself
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(REPO / word)
    elif name.endswith(".memory.pickle"):
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(MEMORY.with_name(MEMORY.name.replace(".pt.trace.json.gz",
                                                         ".memory.pickle")), target)
    elif verb == "memory" and word.endswith(_TRACE_END):
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(MEMORY, target)
    elif verb == "memory" and "/" in word and not Path(word).suffix:
        target.mkdir(parents=True, exist_ok=True)  # a run's ranks, with memory events
        for r in (0, 1):
            shutil.copy(MEMORY, target / f"train.rank{r}.pt.trace.json.gz")
    elif name == "peaks.json":
        from tests.cli.test_roofline_cli import fake_measure

        target.write_text(json.dumps(fake_measure()))
    elif name == "sweep":
        _write_sweep(target)
    elif word.endswith(".sqlite"):
        if not NSYS.exists():
            pytest.skip(f"{word}: shared fixture {NSYS.name} not present")
        target.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(NSYS) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    elif word.endswith(_TRACE_END):
        stem = name.split(".")[0]
        src = next((p for p in FIXTURES.glob(f"{stem}.pt.trace.json.gz")), None)
        src = DDP[0] if stem == "train" else (src or EAGER)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, target)
    elif "/" in word and not Path(word).suffix:
        m = re.fullmatch(r"n(\d+)", name)
        _write_ranks(target, int(m.group(1)) if m else 2)


def _write_ranks(folder: Path, n: int) -> None:
    """A run of ``n`` ranks: the DDP fixture's ranks as they are, or (any other count)
    copies of them that say they are rank r of n (for examples of several GPU counts)."""
    folder.mkdir(parents=True)
    if n == len(DDP):
        for p in DDP:
            shutil.copy(p, folder / p.name)
        return
    for r in range(n):
        text = gzip.decompress(DDP[r % 2].read_bytes()).decode()
        text = re.sub(r'"rank": *\d+', f'"rank": {r}', text, count=1)
        text = re.sub(r'"world_size": *\d+', f'"world_size": {n}', text, count=1)
        (folder / f"rank{r}.pt.trace.json.gz").write_bytes(
            gzip.compress(text.encode(), compresslevel=1))


def _inputs(argv: list[str]) -> list[str]:
    """The words of an argv that may name input files (not options, not outputs, not SQL)."""
    out = []
    for prev, w in zip(["", *argv], argv, strict=False):
        if prev in OUTPUT_OPTIONS or w.startswith("-") or " " in w:
            continue
        if "/" in w or w.endswith((*_TRACE_END, ".pickle")) or w in ("sweep", "peaks.json"):
            out.append(w)
    return out


README_EXAMPLES = readme_examples(README.read_text())
ALL = README_EXAMPLES + help_examples()


def test_examples_are_collected() -> None:
    texts = [e.text for e in README_EXAMPLES]
    assert "traceforge top-kernels sample:h100-eager --by family" in texts
    assert any(e.text.startswith("traceforge sql t.json") and "LIMIT 5" in e.text
               for e in README_EXAMPLES)  # a continued line is one command
    assert any(e.where.startswith("traceforge compare") for e in ALL)
    assert set(NOT_RUN) <= {e.argv[0] for e in ALL}, "NOT_RUN names a verb with no example"


def test_collector_on_a_new_example() -> None:
    md = ("Some text `traceforge newverb TRACE [--x N]`.\n\n```console\n"
          "$ traceforge idle a.json --min-gap-us 5   # why\n$ echo hi\n```\n")
    got = readme_examples(md)
    assert [(e.text, e.inline) for e in got] == [
        ("traceforge newverb TRACE [--x N]", True),
        ("traceforge idle a.json --min-gap-us 5   # why", False)]
    assert _is_synopsis(got[0]) and got[1].argv == ["idle", "a.json", "--min-gap-us", "5"]


@pytest.mark.parametrize("ex", ALL, ids=[f"{e.where} {e.text[11:60]}" for e in ALL])
def test_example_runs(ex: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not _runnable(ex):
        _check_options(ex)
        return
    verb = _verb(ex.argv)[1][0]
    if verb in NOT_RUN:
        pytest.skip(f"{verb}: {NOT_RUN[verb]}")
    monkeypatch.chdir(tmp_path)
    for w in _inputs(ex.argv):
        materialize(w, tmp_path, verb)
    code, out, err = cli_main(*ex.argv)
    assert code == 0, f"{ex.where}: `{ex.text}` exited {code}: {err.strip()}"
    assert "internal error" not in err


@pytest.mark.parametrize("where,code", python_blocks(README.read_text()))
def test_readme_notebook_block_runs(where: str, code: str, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("duckdb")
    monkeypatch.chdir(tmp_path)
    for lit in re.findall(r"\"([^\"\s]+)\"", code):
        if lit.endswith(_TRACE_END) or lit in ("sweep", "runs/ddp") or (REPO / lit).exists():
            materialize(lit, tmp_path)
    exec(compile(code, where, "exec"), {"__name__": "readme"})  # noqa: S102 - our README
