"""What a new user hits first: errors across processes, folders as runs, ``sample:NAME``,
unwritable outputs and odd option values. Each ends as one line and exit 2 (or works)."""

from __future__ import annotations

import inspect
import json
import pickle
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

import traceforge as tf
from tests.conftest import SHARED, shared
from traceforge import errors
from traceforge.cli import cli, main
from traceforge.errors import TraceforgeError, TraceFormatError
from traceforge.ui import perfetto as ui

SAMPLE = "sample:h100-compiled"
KERNEL_CSV_HEADER = ('"Kind","Agent_Id","Queue_Id","Thread_Id","Dispatch_Id","Kernel_Id",'
                     '"Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"\n')


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The CLI in this process, through ``main`` (its error mapping included)."""
    try:
        main(list(args))
        rc = 0
    except SystemExit as e:
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_error(rc: int, err: str, *parts: str) -> None:
    assert rc == 2, err
    assert err.startswith("traceforge: error: ") and err.count("\n") == 1, err
    for part in parts:
        assert part in err, err


def kineto(p: Path, rank: int | None = None, world: int = 2) -> Path:
    doc: dict[str, object] = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": world}
    p.write_text(json.dumps(doc))
    return p


def kernel_csv(p: Path, t0: int, n: int = 2) -> Path:
    rows = "".join(f'"KERNEL_DISPATCH",1,1,69,{i},16,"kern_{i}",{i},{t0 + 10 * i},'
                   f'{t0 + 10 * i + 5}\n' for i in range(n))
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(KERNEL_CSV_HEADER + rows)
    return p


# -- errors cross process boundaries ------------------------------------------------------

def _all_errors() -> list[type[TraceforgeError]]:
    out: list[type[TraceforgeError]] = []
    todo: list[type[TraceforgeError]] = [TraceforgeError]
    while todo:
        c = todo.pop()
        out.append(c)
        todo += c.__subclasses__()
    return out


@pytest.mark.parametrize("cls", _all_errors(), ids=lambda c: c.__name__)
def test_every_error_pickles(cls: type[TraceforgeError]) -> None:
    assert cls.__module__ == errors.__name__  # one exception tree, in one module
    try:
        params = [p for p in inspect.signature(cls).parameters.values()
                  if p.kind is p.POSITIONAL_OR_KEYWORD]
    except ValueError:  # Exception's own (*args) constructor
        params = []
    args = [f"/x/{p.name}.json" if p.name == "path" else f"the {p.name}" for p in params] \
        or ["/x/a.json: a problem"]
    e = cls(*args)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls and str(back) == str(e) and back.exit_code == e.exit_code
    assert back.__dict__ == e.__dict__


def test_pool_reraises_the_reader_error_naming_the_file(tmp_path: Path) -> None:
    good = kineto(tmp_path / "rank0.json", rank=0)
    empty = tmp_path / "rank1.json"
    empty.write_bytes(b"")
    with pytest.raises(TraceFormatError, match=r"rank1\.json: empty file"):
        tf.load_run([good, empty], workers=2)


@pytest.mark.parametrize("verb", ["overlap", "breakdown", "report"])
def test_run_verbs_on_a_list_with_an_empty_file(verb: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    good = kineto(tmp_path / "rank0.json", rank=0)
    empty = tmp_path / "rank1.json"
    empty.write_bytes(b"")
    out = ["-o", str(tmp_path / "r.md")] if verb == "report" else []
    rc, _, err = run_cli(capsys, verb, str(good), str(empty), *out)
    one_line_error(rc, err, str(empty), "empty file")


# -- a folder given as a run --------------------------------------------------------------

@pytest.fixture
def run_folder(tmp_path: Path) -> Path:
    """Two ranks and the companions a capture or a profiler leaves beside them."""
    d = tmp_path / "run"
    d.mkdir()
    kineto(d / "rank0.pt.trace.json", rank=0)
    kineto(d / "rank1.pt.trace.json", rank=1)
    (d / "train.sdpa.summary.json").write_text('{"exit_status": 0}')
    (d / "latency.json").write_text('{"rows": []}')
    (d / "execution_details.json").write_text("[]")
    (d / "README.md").write_text("notes\n")
    (d / "kernel_stats.csv").write_text('"Name","Calls","TotalDurationNs"\n"k",1,5\n')
    (d / ".hidden.json").write_text("{")
    kineto(d / "rank0.failed.pt.trace.json", rank=0)
    (d / "older").mkdir()
    kineto(d / "older" / "rank2.pt.trace.json", rank=2, world=8)  # another run: not read
    return d


def test_folder_reads_its_top_level_traces_and_notes_the_rest(run_folder: Path) -> None:
    traces = tf.load_run(run_folder)
    assert [Path(t.meta.path).name for t in traces] == ["rank0.pt.trace.json",
                                                        "rank1.pt.trace.json"]
    note = traces[0].meta.notes[-1]
    for skipped in ("train.sdpa.summary.json (a traceforge capture summary)",
                    "latency.json (a latency table", "execution_details.json", "README.md",
                    "kernel_stats.csv", "rank0.failed.pt.trace.json", "older/ (subfolders"):
        assert skipped in note
    assert ".hidden" not in note


@pytest.mark.parametrize("verb", ["overlap", "breakdown", "report"])
def test_run_verbs_on_a_folder_with_companions(verb: str, run_folder: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = ["-o", str(tmp_path / "r.md")] if verb == "report" else []
    rc, _, err = run_cli(capsys, verb, str(run_folder), *out)
    assert rc == 0, err


def test_non_trace_named_directly_says_what_it_is(run_folder: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    for name, what in (("train.sdpa.summary.json", "a traceforge capture summary"),
                       ("latency.json", "a latency table")):
        rc, _, err = run_cli(capsys, "top-kernels", str(run_folder / name))
        one_line_error(rc, err, name, what, "not a trace")


def test_folder_of_folders_is_never_merged(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The fixtures-tree case: rocprof CSVs of unrelated runs in several subfolders."""
    kernel_csv(tmp_path / "sdk" / "kernel_trace.csv", t0=10**9)
    kernel_csv(tmp_path / "other" / "run" / "kernel_trace.csv", t0=8 * 10**15)
    (tmp_path / "PROVENANCE.md").write_text("where these came from\n")
    with pytest.raises(TraceFormatError, match="directory without trace files at its top level"):
        tf.load(tmp_path)
    with pytest.raises(TraceFormatError, match="no trace files at its top level"):
        tf.load_run(tmp_path)
    rc, _, err = run_cli(capsys, "top-kernels", str(tmp_path))
    one_line_error(rc, err, str(tmp_path))


def test_folder_of_several_traces_is_an_error_for_single_trace_verbs(
        run_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(capsys, "ops", str(run_folder))
    one_line_error(rc, err, "directory with 2 trace files", "name a file")


def test_shared_fixture_trees_are_not_merged(capsys: pytest.CaptureFixture[str]) -> None:
    if not (SHARED / "external").is_dir():
        pytest.skip("shared fixtures not present")
    for d in (SHARED, SHARED / "external"):
        rc, _, err = run_cli(capsys, "top-kernels", str(d))
        one_line_error(rc, err, str(d))


def test_rocprofv3_default_tree_is_one_run_split_by_process(tmp_path: Path) -> None:
    for pid, t0 in ((200, 5000), (100, 1000)):
        kernel_csv(tmp_path / "host" / str(pid) / f"{pid}_kernel_trace.csv", t0=t0, n=3)
        (tmp_path / "host" / str(pid) / f"{pid}_agent_info.csv").write_text("a,b\n")
    t = tf.load(tmp_path)
    assert len(t.kernels()) == 6 and t.meta.world_size == 2
    ranks = tf.load_run(tmp_path)
    assert [len(r.kernels()) for r in ranks] == [3, 3]
    assert [r.meta.rank for r in ranks] == [0, 1]
    # A stray file without rocprofv3's %pid%_ prefix makes it some other folder.
    (tmp_path / "host" / "notes.txt").write_text("x")
    with pytest.raises(TraceFormatError, match="directory"):
        tf.load(tmp_path)


def test_rocprofv3_top_level_csvs_of_several_runs_are_an_error(tmp_path: Path) -> None:
    kernel_csv(tmp_path / "policy.eager_kernel_trace.csv", t0=1000)
    kernel_csv(tmp_path / "policy.sdpa_kernel_trace.csv", t0=9000)
    with pytest.raises(TraceFormatError, match=r"rocprofv3 CSVs of 2 runs \(policy\.eager_\*"):
        tf.load(tmp_path)
    (tmp_path / "policy.sdpa_kernel_trace.csv").unlink()
    (tmp_path / "policy.eager.summary.json").write_text("{}")  # traceforge capture beside it
    assert len(tf.load(tmp_path).kernels()) == 2


# -- sample:NAME in every verb that takes a trace -----------------------------------------

@pytest.mark.parametrize("args", [
    ["top-kernels", SAMPLE], ["ops", SAMPLE], ["info", SAMPLE], ["idle", SAMPLE],
    ["launch", SAMPLE], ["overlap", SAMPLE], ["breakdown", SAMPLE], ["diff", SAMPLE, SAMPLE],
    ["overlap", SAMPLE, SAMPLE.replace("compiled", "eager")],
], ids=lambda a: "-".join(a[:1] + [str(len(a))]))
def test_sample_in_every_trace_verb(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(capsys, *args)
    if args[0] == "overlap" and len(args) == 3:
        # Two different runs, both rank-less: refused as a run, but both samples were found.
        one_line_error(rc, err, "no rank")
        return
    assert rc == 0, err
    assert out.strip()


def test_sample_in_writers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["convert", SAMPLE, str(tmp_path / "c.json.gz")],
                 ["convert", SAMPLE, str(tmp_path / "c.pftrace")],
                 ["annotate", SAMPLE, "-o", str(tmp_path / "a.pftrace")],
                 ["report", SAMPLE, "-o", str(tmp_path / "r.md")]):
        rc, _, err = run_cli(capsys, *args)
        assert rc == 0, (args, err)
    assert all((tmp_path / n).stat().st_size > 0
               for n in ("c.json.gz", "c.pftrace", "a.pftrace", "r.md"))


def test_sample_in_open(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    monkeypatch.setattr(ui, "PORT", port)
    r = CliRunner().invoke(cli, ["open", SAMPLE, "--no-browser", "--timeout", "0.1"])
    # Loaded and served; nobody fetched it before the timeout.
    assert r.exit_code == 1 and "h100-compiled.pt.trace.json.gz" in r.output, r.output


def test_unknown_sample_lists_the_samples(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(capsys, "overlap", "sample:nope")
    one_line_error(rc, err, "sample:nope: no such sample (have: h100-compiled, h100-eager)")


# -- output paths -------------------------------------------------------------------------

def _writers(dst: str) -> list[list[str]]:
    return [["convert", SAMPLE, dst + ".json"], ["convert", SAMPLE, dst + ".pftrace"],
            ["annotate", SAMPLE, "-o", dst + ".json.gz"],
            ["report", SAMPLE, "-o", dst + ".md"]]


@pytest.mark.parametrize("case", ["missing-parent", "permission", "directory"])
def test_unwritable_outputs_are_one_line(case: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    if case == "missing-parent":
        base, why = str(tmp_path / "no" / "such" / "out"), "no such directory"
    elif case == "permission":
        # /sys refuses new files even to root, which chmod cannot show.
        if not Path("/sys").is_dir():
            pytest.skip("no /sys")
        base, why = "/sys/traceforge-test-out", "cannot write"
    else:
        base, why = str(tmp_path / "d"), "is a directory"
    for args in _writers(base):
        if case == "directory":
            Path(args[-1]).mkdir(exist_ok=True)
        rc, _, err = run_cli(capsys, *args)
        one_line_error(rc, err, f"{args[-1]}: cannot write (", why)


def test_write_error_after_the_check_is_one_line(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from traceforge import output_file as output

    def refuse(self: Path, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", refuse)
    with pytest.raises(errors.UsageError, match=r"x\.json: cannot write \(No space left"):
        output.write(tmp_path / "x.json", b"{}")


# -- option values ------------------------------------------------------------------------

BAD_VALUES: list[list[str]] = [
    ["top-kernels", SAMPLE, "-n", "-5"], ["ops", SAMPLE, "-n", "-1"],
    ["idle", SAMPLE, "-n", "-2"], ["idle", SAMPLE, "--min-gap-us", "nan"],
    ["idle", SAMPLE, "--min-gap-us", "inf"], ["idle", SAMPLE, "--min-gap-us", "-5"],
    ["idle", SAMPLE, "--min-gap-us", "1e300"], ["idle", SAMPLE, "--min-gap-us", "abc"],
    ["launch", SAMPLE, "-n", "-3"], ["launch", SAMPLE, "--bound-pct", "101"],
    ["launch", SAMPLE, "--bound-pct", "-1"], ["launch", SAMPLE, "--bound-pct", "nan"],
    ["diff", SAMPLE, SAMPLE, "-n", "-1"], ["report", SAMPLE, "-o", "r.md", "-n", "-4"],
    ["annotate", SAMPLE, "-o", "a.json", "-n", "-1"],
    ["annotate", SAMPLE, "-o", "a.json", "--min-gap-us", "nan"],
    ["annotate", SAMPLE, "-o", "a.json", "--min-gap-us", "-inf"],
    ["open", SAMPLE, "--no-browser", "--timeout", "-1"],
    ["open", SAMPLE, "--no-browser", "--timeout", "nan"],
    ["top-kernels", SAMPLE, "--step", "x"], ["top-kernels", SAMPLE, "-n", "1.5"],
    ["capture", "--steps", "-1,0,1", "--", "python", "x.py"],
]


@pytest.mark.parametrize("args", BAD_VALUES, ids=lambda a: " ".join(a[::2])[:40])
def test_bad_numeric_values_are_one_line(args: list[str], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, *args)
    one_line_error(rc, err)
    assert not out and list(tmp_path.iterdir()) == []  # nothing written, nothing run


def test_every_numeric_option_is_checked() -> None:
    """No verb takes a plain int or float: each numeric option has a range."""
    import importlib

    import click

    from traceforge.cli import COMMANDS

    for mod in COMMANDS:
        command = importlib.import_module(f"traceforge.commands.{mod}").command
        for p in command.params:
            if isinstance(p.type, (click.types.IntParamType, click.types.FloatParamType)) \
                    and p.name != "steps":  # --step N picks a step; unknown ones are errors
                assert isinstance(p.type, (click.IntRange, click.FloatRange)), (mod, p.name)


def test_zero_still_means_all(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "top-kernels", SAMPLE, "-n", "0", "--format", "json")
    assert rc == 0
    n_all = len(json.loads(out))
    rc, out, _ = run_cli(capsys, "top-kernels", SAMPLE, "-n", "3", "--format", "json")
    assert len(json.loads(out)) == 3 < n_all


def test_shared_folder_with_latency_file_reads_its_traces(
        capsys: pytest.CaptureFixture[str]) -> None:
    d = shared("h200-graphs")
    traces = tf.load_run(d)
    assert len(traces) == 1 and "latency_d768.json" in traces[0].meta.notes[-1]


def test_what_no_reader_foresaw_is_still_one_line(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """load() turns a reader's stray ValueError/KeyError/... into one line naming the file."""
    from traceforge.formats import chrome

    def broken(path: Path, kinds: object = None) -> None:
        raise KeyError("args")

    monkeypatch.setattr(chrome, "read", broken)
    p = kineto(tmp_path / "t.json")
    with pytest.raises(TraceFormatError, match=r"t\.json: damaged or unexpected kineto content: "
                                               r"KeyError \('args'\)"):
        tf.load(p)
    rc, _, err = run_cli(capsys, "info", str(p))
    one_line_error(rc, err, str(p), "damaged or unexpected")
