"""`traceforge capture` on CPU: modes, step sources, metadata, exit codes, Ctrl-C, backends.

Targets are tiny scripts written into tmp_path, so each run takes about a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import traceforge
from tests.conftest import REPO
from traceforge.capture import compare
from traceforge.capture.options import COMPILED_STEPS, DEFAULT_STEPS, parse_modes, parse_steps
from traceforge.capture.target import parse_launch, parse_python
from traceforge.cli import main
from traceforge.errors import UsageError

#: A module whose forward runs SDPA, called ``argv[1]`` times; exits with ``argv[2]`` if given.
TINY = """
import sys, torch, torch.nn.functional as F

class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        q = self.lin(x).view(1, 2, 4, 8)
        return F.scaled_dot_product_attention(q, q, q)

model = torch.compile(Attn())
x = torch.randn(4, 16)
for _ in range(int(sys.argv[1])):
    model(x)
print("ARGV", sys.argv[1:], __name__)
if len(sys.argv) > 2:
    sys.exit(int(sys.argv[2]))
"""


@pytest.fixture(autouse=True)
def _run_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
                ) -> None:
    # Captures refused before their target runs must not leave a default output folder
    # (traceforge-out) in the repository.
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


def script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def cli(*args: str) -> int:
    """Run the CLI in this process; returns the exit status it would give."""
    try:
        main(list(args))
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def run_subprocess(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "traceforge", *args], capture_output=True,
                          text=True, timeout=240, cwd=cwd, env=env)


def meta(trace: Path) -> dict[str, Any]:
    block: dict[str, Any] = traceforge.load(trace).meta.extra["traceforge"]
    return block


def op_names(trace: Path) -> set[str]:
    return set(traceforge.load(trace).events["name"].astype(str))


# -- options and targets (no torch) -------------------------------------------------------

def test_parse_steps_and_modes() -> None:
    assert parse_steps("2,1,3").recorded == range(3, 6)
    assert parse_modes("all") == ("eager", "sdpa", "fa2", "compiled")
    assert parse_modes("fa2,eager") == ("fa2", "eager")
    for bad in ("1,2", "a,b,c", "0,1,1", "1,1,0"):
        with pytest.raises(UsageError):
            parse_steps(bad)
    for bad in ("turbo", "eager,eager", ""):
        with pytest.raises(UsageError):
            parse_modes(bad)


def test_parse_targets() -> None:
    t = parse_python(["python3", "-u", "infer.py", "--batch", "1"])
    assert (t.path, t.args, t.is_module, t.stem) == ("infer.py", ("--batch", "1"), False, "infer")
    m = parse_python(["python", "-m", "pkg.serve", "-x"])
    assert (m.path, m.args, m.is_module) == ("pkg.serve", ("-x",), True)
    launch = parse_launch(["torchrun", "--nproc-per-node", "2", "--standalone",
                           "--master_port=29501", "train.py", "--lr", "3"])
    assert launch is not None
    assert launch.options == ("--nproc-per-node", "2", "--standalone", "--master_port=29501")
    assert (launch.target.path, launch.target.args) == ("train.py", ("--lr", "3"))
    via_python = parse_launch(["python", "-m", "torch.distributed.run", "-m", "pkg.train"])
    assert via_python is not None and via_python.target.is_module
    assert parse_launch(["python", "infer.py"]) is None
    with pytest.raises(UsageError):
        parse_python(["bash", "run.sh"])


def test_comparison_prefers_unprofiled_steps() -> None:
    def summary(mode: str, walls: list[float]) -> dict[str, Any]:
        return {"mode": {"mode": mode}, "exit_status": 0,
                "steps": {"wall_s": walls, "recorded": [2, 3], "peak_memory_bytes": [2**30],
                          "schedule": {"wait": 1, "warmup": 1, "active": 2}},
                "trace": {"bytes": 2**20, "kernel_events": 10}}
    a = summary("eager", [9.0, 1.0, 5.0, 5.0, 0.2, 0.4, 0.3])
    b = summary("compiled", [30.0, 1.0, 5.0, 5.0, 0.1])
    rows = compare.comparison([a, b])
    assert rows[0]["latency_ms"] == pytest.approx(300.0)  # median of 0.2, 0.4, 0.3 s
    assert rows[1]["speedup"] == pytest.approx(3.0)
    assert rows[1]["kernels_per_step"] == 5 and rows[0]["peak_gib"] == 1
    only_profiled = summary("sdpa", [1.0, 1.0, 4.0, 2.0])
    lat, label = compare.latency_s(only_profiled)
    assert lat == 3.0 and "profiled steps" in label


# -- runs (torch) ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["eager", "sdpa", "fa2", "compiled"])
def test_cli_capture_each_mode(tmp_path: Path, mode: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    target = script(tmp_path, "tiny.py", TINY)
    out = tmp_path / "out"
    steps = COMPILED_STEPS if mode == "compiled" else DEFAULT_STEPS
    n = steps.wait + steps.warmup + steps.active + 2
    assert cli("capture", "--mode", mode, "-o", str(out), "--", "python", str(target),
               str(n)) == 0
    assert f"ARGV ['{n}'] __main__" in capsys.readouterr().out  # same argv, __main__ semantics
    trace = out / f"tiny.{mode}.pt.trace.json.gz"
    block = meta(trace)
    assert block["mode"]["mode"] == mode
    assert block["steps"]["recorded"] == list(steps.recorded)
    assert len(block["steps"]["wall_s"]) == n - 1  # a step ends where the next call starts
    names = op_names(trace)
    assert {f"ProfilerStep#{i}" for i in steps.recorded} <= names
    summary = json.loads((out / f"tiny.{mode}.summary.json").read_text())
    assert summary["trace"]["path"] == trace.name and summary["exit_status"] == 0
    if mode == "compiled":
        assert block["mode"]["graphs"] >= 1
        assert block["steps"]["source"] == "module call (OptimizedModule)"
        # compilation ran in the wait steps, before the recorded window
        assert sum(block["steps"]["graphs_compiled"][s] for s in steps.recorded) == 0
    else:
        assert block["mode"]["torch_compile_calls"] == 1
        assert block["steps"]["source"] == "module call (Attn)"
        math = "aten::_scaled_dot_product_attention_math" in names
        assert math == (mode == "eager"), sorted(n for n in names if "attention" in n)


def test_api_capture_with_explicit_steps(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(8, 8)
    with traceforge.capture(mode="sdpa", out=tmp_path, name="api", steps="1,1,2",
                            quiet=True) as run:
        for _ in range(6):
            lin(torch.randn(2, 8))
            lin(torch.randn(2, 8))  # two module calls per step: only step() counts
            traceforge.step()
    assert run.step_source == "traceforge.step()"
    assert len(run.steps) == 6 and run.recorded_steps == [2, 3]
    assert run.trace_path == tmp_path / "api.sdpa.pt.trace.json.gz"
    block = meta(run.trace_path)
    assert block["steps"]["source"] == "traceforge.step()"
    assert block["torch"] == torch.__version__ and block["cwd"] == os.getcwd()


def test_optimizer_steps_win_over_module_calls(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    target = script(tmp_path, "train.py", """
        import torch
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(11):
            for _ in range(3):  # gradient accumulation: module calls are not steps here
                model(torch.randn(4, 8)).sum().backward()
            opt.step()
            opt.zero_grad()
    """)
    assert cli("capture", "-o", str(tmp_path), "--", str(target)) == 0
    trace = tmp_path / "train.sdpa.pt.trace.json.gz"
    block = meta(trace)
    assert block["steps"]["source"] == "optimizer.step()"
    assert len(block["steps"]["wall_s"]) == 11
    assert block["steps"]["recorded"] == list(DEFAULT_STEPS.recorded)
    names = op_names(trace)
    assert {f"ProfilerStep#{i}" for i in DEFAULT_STEPS.recorded} <= names
    assert sum("Optimizer.step#SGD" in n for n in names) >= 1


def test_no_steps_means_whole_run(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    target = script(tmp_path, "flat.py", """
        import torch
        a = torch.randn(32, 32)
        for _ in range(3):
            a = torch.tanh(a @ a)
    """)
    assert cli("capture", "-o", str(tmp_path), "--", str(target)) == 0
    block = meta(tmp_path / "flat.sdpa.pt.trace.json.gz")
    assert block["steps"]["source"] == "whole run" and block["steps"]["recorded"] == [0]
    assert "aten::tanh" in op_names(tmp_path / "flat.sdpa.pt.trace.json.gz")


def test_exit_status_and_exception_propagate(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    target = script(tmp_path, "tiny.py", TINY)
    r = run_subprocess("capture", "-o", str(tmp_path), "--", "python", str(target), "6", "3")
    assert r.returncode == 3, r.stderr
    assert json.loads((tmp_path / "tiny.sdpa.summary.json").read_text())["exit_status"] == 3
    boom = script(tmp_path, "boom.py", """
        import torch
        lin = torch.nn.Linear(4, 4)
        for _ in range(5):
            lin(torch.randn(2, 4))
        raise ValueError("target failed on purpose")
    """)
    r = run_subprocess("capture", "-o", str(tmp_path), "--steps", "1,1,2", "--", "python",
                       str(boom))
    assert r.returncode == 1
    assert "ValueError: target failed on purpose" in r.stderr
    assert "runpy" not in r.stderr and "traceforge/capture" not in r.stderr
    # The completed steps were written, under the name of a failed run.
    block = meta(tmp_path / "boom.sdpa.failed.pt.trace.json.gz")
    assert block["exit_status"] == 1 and block["steps"]["recorded"] == [2, 3]


def test_failed_run_never_replaces_a_good_trace(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import hashlib

    target = script(tmp_path, "flaky.py", """
        import sys, torch, traceforge
        lin = torch.nn.Linear(4, 4)
        for _ in range(6):
            lin(torch.randn(2, 4))
            traceforge.step()
        if sys.argv[1:] == ["--typo"]:
            raise SystemExit("unrecognized argument --typo")
    """)
    out = tmp_path / "out"
    good = out / "flaky.sdpa.pt.trace.json.gz"
    assert run_subprocess("capture", "-o", str(out), "--", "python", str(target)).returncode == 0
    before = hashlib.sha256(good.read_bytes()).hexdigest()
    r = run_subprocess("capture", "-o", str(out), "--", "python", str(target), "--typo")
    assert r.returncode == 1, r.stderr
    assert hashlib.sha256(good.read_bytes()).hexdigest() == before
    failed = out / "flaky.sdpa.failed.pt.trace.json.gz"
    assert meta(failed)["exit_status"] == 1 and meta(good)["exit_status"] == 0
    assert "kept the earlier flaky.sdpa.pt.trace.json.gz" in r.stderr
    summary = json.loads((out / "flaky.sdpa.summary.json").read_text())
    assert summary["trace"]["path"] == failed.name  # the summary describes the latest run
    # No temporary file is left behind, and a folder read as a run leaves the failure out.
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [good.name, failed.name, "flaky.sdpa.summary.json"])
    t = traceforge.load_run(out)
    assert [x.meta.path for x in t] == [str(good)]
    assert "flaky.sdpa.failed.pt.trace.json.gz (the trace of a failed capture)" in \
        t[0].meta.notes[-1]


def test_ctrl_c_writes_what_was_captured(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    target = script(tmp_path, "intr.py", """
        import os, signal, torch, traceforge
        # A Ctrl-C as a terminal delivers it: a shell's background job (a test run with
        # "&") starts with SIGINT ignored, and Python then installs no handler for it.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        lin = torch.nn.Linear(4, 4)
        for i in range(10):
            lin(torch.randn(2, 4))
            traceforge.step()
            if i == 2:  # inside the recorded window (steps 2 and 3)
                os.kill(os.getpid(), signal.SIGINT)
    """)
    r = run_subprocess("capture", "-o", str(tmp_path), "--steps", "1,1,2", "--", "python",
                       str(target))
    assert r.returncode == 130, r.stderr
    block = meta(tmp_path / "intr.sdpa.failed.pt.trace.json.gz")
    assert block["interrupted"] is True and block["steps"]["recorded"] == [2, 3]
    assert len(block["steps"]["wall_s"]) == 3


def test_unwritable_output_fails_before_the_target_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    target = script(tmp_path, "t.py", f"open({str(marker)!r}, 'w').close()\n")
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run_subprocess("capture", "-o", str(blocker / "out"), "--", "python", str(target))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "not writable" in r.stderr
    assert not marker.exists()


def test_missing_profilers_are_one_line_errors(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    target = script(tmp_path, "t.py", "print('hi')\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("TRACEFORGE_NSYS", raising=False)
    monkeypatch.delenv("TRACEFORGE_ROCPROF", raising=False)
    assert cli("capture", "--backend", "nsys", "-o", str(tmp_path), "--", str(target)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nsys not found" in err and "TRACEFORGE_NSYS" in err
    assert cli("capture", "--backend", "rocprof", "-o", str(tmp_path), "--", str(target)) == 2
    err = capsys.readouterr().err
    assert "rocprofv3 or rocprof not found" in err and "TRACEFORGE_ROCPROF" in err


FAKE_NSYS = """#!/bin/sh
# Stands in for nsys: logs its arguments, runs the profiled command, writes empty outputs.
echo "$@" >> "$(dirname "$0")/calls.log"
case "$1" in
  --version) echo "fake nsys 0.0"; exit 0 ;;
  profile) shift; out=""
    while [ $# -gt 0 ]; do case "$1" in
      -o) out="$2"; shift 2 ;; -t) shift 2 ;; --*) shift ;; *) break ;; esac; done
    "$@"; rc=$?; : > "$out"; exit $rc ;;
  export) while [ $# -gt 1 ]; do case "$1" in -o) out="$2"; shift 2 ;; *) shift ;; esac; done
    : > "$out"; exit 0 ;;
esac
"""


def test_nsys_backend_builds_profile_and_export(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    fake = tmp_path / "bin" / "nsys"
    fake.parent.mkdir()
    fake.write_text(FAKE_NSYS)
    fake.chmod(0o755)
    target = script(tmp_path, "tiny.py", TINY)
    out = tmp_path / "out"
    r = run_subprocess("capture", "--backend", "nsys", "--nsys", str(fake), "--mode", "fa2",
                       "-o", str(out), "--", "python", str(target), "4", "5")
    assert r.returncode == 5, r.stderr
    calls = (fake.parent / "calls.log").read_text()
    assert "-t cuda,nvtx,osrt,cublas,cudnn --cuda-graph-trace=node" in calls
    assert "export --type sqlite" in calls
    summary = json.loads((out / "tiny.fa2.summary.json").read_text())
    assert summary["backend"] == "nsys" and summary["exit_status"] == 5
    assert summary["nsys"]["sqlite"] == "tiny.fa2.sqlite" and (out / "tiny.fa2.sqlite").exists()
    assert summary["mode"]["mode"] == "fa2"


def test_multi_mode_comparison_table(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    target = script(tmp_path, "tiny.py", TINY)
    r = run_subprocess("capture", "--mode", "eager,sdpa", "--format", "json", "-o",
                       str(tmp_path), "--", "python", str(target), "13")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["mode"] for row in rows] == ["eager", "sdpa"]
    assert rows[0]["speedup"] == pytest.approx(1.0)
    for row in rows:
        trace = tmp_path / f"tiny.{row['mode']}.pt.trace.json.gz"
        assert row["trace_mib"] == pytest.approx(trace.stat().st_size / 2**20)
        assert row["timed_steps"].endswith("unprofiled steps")


def test_torchrun_writes_one_trace_per_rank(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    torchrun = Path(sys.executable).with_name("torchrun")
    launcher = [str(torchrun)] if torchrun.exists() else [sys.executable, "-m",
                                                           "torch.distributed.run"]
    r = run_subprocess("capture", "-o", str(tmp_path), "--", *launcher, "--standalone",
                       "--nproc-per-node", "2", str(REPO / "examples" / "ddp_train.py"),
                       "--steps", "5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for rank in (0, 1):
        block = meta(tmp_path / f"ddp_train.sdpa.rank{rank}.pt.trace.json.gz")
        assert block["rank"] == rank and block["env"]["WORLD_SIZE"] == "2"
        assert block["steps"]["source"] == "optimizer.step()"


def test_rocprof_prefers_v3_and_falls_back_to_legacy(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    target = script(tmp_path, "t.py", "print('hi')\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.delenv("TRACEFORGE_ROCPROF", raising=False)

    def fake(name: str) -> None:
        # Logs its arguments instead of profiling; the target is not run.
        p = bindir / name
        p.write_text(f'#!/bin/sh\necho "{name} $@" >> {log}\n')
        p.chmod(0o755)

    fake("rocprof")
    assert cli("capture", "--backend", "rocprof", "-o", str(tmp_path), "--", str(target)) == 0
    def last_profile() -> str:
        return [c for c in log.read_text().splitlines() if not c.endswith("--version")][-1]

    legacy = last_profile()
    assert legacy.startswith("rocprof --hip-trace --roctx-trace")
    fake("rocprofv3")
    assert cli("capture", "--backend", "rocprof", "-o", str(tmp_path), "--", str(target)) == 0
    v3 = last_profile()
    assert v3.startswith("rocprofv3 --kernel-trace --hip-trace --memory-copy-trace "
                         "--marker-trace --output-format csv json pftrace")
    assert "-m traceforge capture --backend nvtx" in v3 and v3.endswith(str(target))
    summary = json.loads((tmp_path / "t.sdpa.summary.json").read_text())
    assert summary["backend"] == "rocprof" and summary["rocprof"]["command"][0].endswith("v3")


def test_torchrun_with_an_outer_profiler_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # nsys records a torchrun process tree (test_capture_sweep.py); rocprof does not.
    assert cli("capture", "--backend", "rocprof", "--", "torchrun", "--nproc-per-node", "2",
               "train.py") == 2
    assert "not supported" in capsys.readouterr().err


def test_fa2_mode_defaults_hugging_face_models_to_flash_attention_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from traceforge.capture.modes import apply_mode

    # Stand-ins for the two packages: only their presence and from_pretrained matter.
    (tmp_path / "flash_attn").mkdir()
    (tmp_path / "flash_attn" / "__init__.py").write_text("")
    (tmp_path / "transformers").mkdir()
    (tmp_path / "transformers" / "__init__.py").write_text(textwrap.dedent("""
        class PreTrainedModel:
            @classmethod
            def from_pretrained(cls, name, **kwargs):
                return cls.__name__, kwargs
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import transformers  # the stand-in

    class Llama(transformers.PreTrainedModel):
        pass

    with apply_mode("fa2") as state:
        assert Llama.from_pretrained("m") == ("Llama", {"attn_implementation": "flash_attention_2"})
        assert Llama.from_pretrained("m", attn_implementation="sdpa")[1] == {
            "attn_implementation": "sdpa"}  # the script's own choice wins
    assert any("flash_attention_2" in a for a in state.actions)
    assert Llama.from_pretrained("m") == ("Llama", {})  # undone after the run
    monkeypatch.delitem(sys.modules, "transformers")


def test_policy_example_runs_on_cpu_at_toy_size(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    example = REPO / "examples" / "policy_infer.py"
    assert cli("capture", "--mode", "sdpa", "-o", str(tmp_path), "--", "python", str(example),
               "--iters", "11") == 0
    block = meta(tmp_path / "policy_infer.sdpa.pt.trace.json.gz")
    assert block["steps"]["source"] == "module call (Policy)"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    if head.returncode == 0:  # the example lives in this repository's checkout
        assert block["git"]["commit"] == head.stdout.strip()
    assert block["steps"]["recorded"] == list(DEFAULT_STEPS.recorded)


def test_mistyped_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("capture", "--mdoe", "fa2", "--", "python", "x.py") == 2
    assert "--mdoe: not a traceforge capture option" in capsys.readouterr().err
