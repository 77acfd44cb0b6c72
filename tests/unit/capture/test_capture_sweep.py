"""`capture --nproc` sweeps and `capture --backend nsys` around torchrun, on CPU: the launch
rewriting and environment are checked with stand-in executables, and one real sweep of
examples/ddp_train.py runs torchrun with gloo at 1 and 2 ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from traceforge.capture.sweep import check_devices, parse_counts, with_nproc
from traceforge.capture.target import parse_launch
from traceforge.capture.torchrun import launch_env
from traceforge.errors import UsageError

DDP = REPO / "examples" / "ddp_train.py"


@pytest.fixture(autouse=True)
def _run_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
                ) -> None:
    # Captures refused before their target runs must not leave a default output folder
    # (traceforge-out) in the repository.
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "traceforge", *args], capture_output=True,
                          text=True, timeout=300, env=full, cwd=cwd)


def test_nproc_value_is_replaced_or_added() -> None:
    def opts(words: list[str], n: int) -> tuple[str, ...]:
        launch = parse_launch(["torchrun", *words, "train.py", "--lr", "1"])
        assert launch is not None
        out = with_nproc(launch, n)
        assert out.target.args == ("--lr", "1")
        return out.options

    assert opts(["--standalone", "--nproc-per-node", "8"], 2) == (
        "--standalone", "--nproc-per-node", "2")
    assert opts(["--nproc_per_node=8", "--standalone"], 4) == ("--nproc_per_node=4",
                                                               "--standalone")
    assert opts(["--standalone"], 1) == ("--standalone", "--nproc-per-node", "1")
    assert opts(["--nnodes", "1", "--nproc-per-node", "8"], 2)[-1] == "2"
    with pytest.raises(UsageError, match="one node"):
        opts(["--nnodes", "2", "--nproc-per-node", "8"], 2)
    with pytest.raises(UsageError, match="one node"):
        opts(["--nnodes=1:4"], 2)


def test_counts_and_visible_devices() -> None:
    assert parse_counts("1,2,4,8") == (1, 2, 4, 8)
    for bad in ("", "0,1", "1,1", "one"):
        with pytest.raises(UsageError):
            parse_counts(bad)
    check_devices((1, 2), {"CUDA_VISIBLE_DEVICES": "0,1"})
    with pytest.raises(UsageError, match="CUDA_VISIBLE_DEVICES=0,1 leaves 2 GPU"):
        check_devices((1, 2, 4), {"CUDA_VISIBLE_DEVICES": "0,1"})


def test_environment_passes_through_without_an_outer_workers_rank() -> None:
    env = launch_env({"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1",
                      "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "CUDA_VISIBLE_DEVICES": "0,1",
                      "PATH": "/bin", "RANK": "3", "LOCAL_RANK": "3", "WORLD_SIZE": "8",
                      "TORCHELASTIC_RUN_ID": "x", "MASTER_PORT": "29500"})
    assert env == {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1",
                   "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "CUDA_VISIBLE_DEVICES": "0,1",
                   "PATH": "/bin", "MASTER_PORT": "29500"}


def _fake(bindir: Path, name: str, body: str) -> Path:
    bindir.mkdir(exist_ok=True)
    p = bindir / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return p


def test_sweep_layout_per_mode_with_a_stand_in_torchrun(tmp_path: Path) -> None:
    # The stand-in logs its arguments and the variables it was given, and runs nothing.
    log = tmp_path / "calls.log"
    bindir = tmp_path / "bin"
    _fake(bindir, "torchrun", f'echo "$@ | NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE RANK=$RANK" '
                              f'>> {log}\n')
    out = tmp_path / "sweep"
    r = run_cli("capture", "--nproc", "1,2", "--mode", "sdpa,compiled", "--batch", "8",
                "-o", str(out), "--", str(bindir / "torchrun"), "--standalone",
                "--nproc-per-node", "8", "train.py", "--size", "toy",
                env={"NCCL_NVLS_ENABLE": "0", "RANK": "5"})
    assert r.returncode == 0, r.stderr
    calls = log.read_text().splitlines()
    assert len(calls) == 4
    assert calls[0].startswith("--standalone --nproc-per-node 1 -m traceforge capture "
                               "--mode sdpa --backend torch -o " + str(out / "sdpa" / "n1"))
    assert "--nproc-per-node 2" in calls[1] and "--mode compiled" in calls[2]
    assert all(c.endswith("| NCCL_NVLS_ENABLE=0 RANK=") for c in calls)
    for mode in ("sdpa", "compiled"):
        doc = json.loads((out / mode / "sweep.summary.json").read_text())
        assert doc["counts"] == [1, 2] and doc["batch_per_gpu"] == 8.0
        assert [x["folder"] for x in doc["runs"]] == ["n1", "n2"]
        assert doc["env"]["NCCL_NVLS_ENABLE"] == "0" and "RANK" not in doc["env"]
    # The runs wrote no traces: no scaling table, one line saying why, exit status kept.
    assert "no scaling table for" in r.stderr
    r = run_cli("capture", "--nproc", "2", "--", "python", "train.py")
    assert r.returncode == 2 and "torchrun" in r.stderr and r.stderr.count("\n") == 1
    # --batch goes with any capture (issue 24): the only complaint is the missing script.
    r = run_cli("capture", "--batch", "2", "--", "python", "train.py")
    assert r.returncode == 2 and "--nproc" not in r.stderr and "no such script" in r.stderr


def test_nsys_wraps_the_whole_torchrun_process_tree(tmp_path: Path) -> None:
    log = tmp_path / "nsys.log"
    nsys = _fake(tmp_path / "bin", "nsys", f"""echo "$@" >> {log}
case "$1" in
  --version) echo "fake nsys 0.0" ;;
  profile|export) while [ $# -gt 0 ]; do case "$1" in -o) : > "$2"; break ;;
    *) shift ;; esac; done ;;
esac
""")
    out = tmp_path / "out"
    r = run_cli("capture", "--backend", "nsys", "--nsys", str(nsys), "-o", str(out), "--",
                "torchrun", "--standalone", "--nproc-per-node", "2", "train.py")
    assert r.returncode == 0, r.stderr
    profile, export = [c for c in log.read_text().splitlines() if c != "--version"]
    assert profile.startswith("profile -t cuda,nvtx,osrt,cublas,cudnn --cuda-graph-trace=node "
                              "--force-overwrite=true -o " + str(out / "train.sdpa.nsys-rep"))
    assert "--trace-fork-before-exec=true torchrun --standalone --nproc-per-node 2 -m " \
           "traceforge capture --mode sdpa --backend nvtx" in profile
    assert export.startswith("export --type sqlite")
    summary = json.loads((out / "train.sdpa.summary.json").read_text())
    assert summary["backend"] == "nsys"
    assert summary["nsys"]["report"] == "train.sdpa.nsys-rep"
    assert summary["nsys"]["sqlite"] == "train.sdpa.sqlite"
    assert "nsys sqlite (all ranks)" in r.stderr
    r = run_cli("capture", "--backend", "rocprof", "--", "torchrun", "--nproc-per-node", "2",
                "train.py")
    assert r.returncode == 2 and "not supported" in r.stderr


@pytest.mark.slow
def test_cpu_sweep_of_the_ddp_example_then_scaling(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    torchrun = Path(sys.executable).with_name("torchrun")
    launcher = [str(torchrun)] if torchrun.exists() else [sys.executable, "-m",
                                                           "torch.distributed.run"]
    out = tmp_path / "sweep"
    r = run_cli("capture", "--nproc", "1,2", "--batch", "2", "--format", "json", "-o", str(out),
                "--", *launcher, "--standalone", "--nproc-per-node", "8", str(DDP),
                "--steps", "5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for n in (1, 2):
        traces = sorted((out / f"n{n}").glob("ddp_train.sdpa.rank*.pt.trace.json.gz"))
        assert len(traces) == n
    doc = json.loads(r.stdout)
    runs = doc["runs"]
    assert [x["gpus"] for x in runs] == [1, 2] and [x["ranks_traced"] for x in runs] == [1, 2]
    for x in runs:
        assert x["samples_per_s"] == pytest.approx(2 * x["gpus"] * 1e9 / x["step_ns"],
                                                   rel=1e-6)  # JSON: times in integer ns
        assert x["wall_step_ns"] > 0  # unprofiled latency from the capture summaries
    r = run_cli("scaling", str(out), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    # CPU traces have no GPU activity: the whole step is residual, and every row adds up.
    for row in doc["losses"]:
        total = sum(row[f"{t}_ns"] for t in ("compute", "exposed_comm", "straggler_wait",
                                              "idle", "memory", "imbalance", "residual"))
        assert total == pytest.approx(row["growth_ns"], abs=8)  # each rounded to 1 ns


def test_nsys_rank_check_script_on_the_h200_export(tmp_path: Path) -> None:
    # The check examples/scaling_sweep.sh runs on the GPU, here on a one-process export and
    # the `nsys stats` CSV made from it.
    import gzip
    import shutil

    from tests.conftest import shared

    db = tmp_path / "policy_fa2.sqlite"
    with gzip.open(shared("h200-nsys/policy_fa2.sqlite.gz"), "rb") as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    csv = shared("h200-nsys/policy_fa2_stats_cuda_gpu_kern_sum.csv")
    script = str(REPO / "examples" / "check_nsys_ranks.py")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, script, str(db), str(csv), "--ranks", "1"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "43 kernel names in cuda_gpu_kern_sum" in r.stdout and r.stdout.rstrip().endswith(
        "OK")
    r = subprocess.run([sys.executable, script, str(db), str(csv), "--ranks", "2"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 1 and "MISMATCH" in r.stdout
