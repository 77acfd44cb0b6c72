"""Where and with what a capture ran: host, GPUs, driver, library versions, git, environment.

Everything here is best effort: a fact that cannot be read is left out, never an error,
because a trace without its driver version is still worth writing.
"""

from __future__ import annotations

import importlib
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Environment variables worth keeping: they change how NCCL, torch and CUDA behave.
ENV_PREFIXES: tuple[str, ...] = ("NCCL_", "TORCH_", "CUDA_", "PYTORCH_", "TORCHINDUCTOR_",
                                 "NVSHMEM_", "RCCL_", "HIP_", "ROCR_")
ENV_NAMES: tuple[str, ...] = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                              "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS")


def relevant_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The NCCL_*/TORCH_*/CUDA_* (and distributed) variables of ``env`` (default os.environ)."""
    src = os.environ if env is None else env
    return {k: v for k, v in sorted(src.items()) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


def _run(args: list[str], cwd: str | None = None) -> str | None:
    try:
        out = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_info(path: str | Path) -> dict[str, Any] | None:
    """Commit and dirtiness of the git repository holding ``path``, or None outside one."""
    if shutil.which("git") is None:
        return None
    folder = Path(path).resolve()
    folder = folder if folder.is_dir() else folder.parent
    commit = _run(["git", "rev-parse", "HEAD"], cwd=str(folder))
    if not commit:
        return None
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=str(folder))
    root = _run(["git", "rev-parse", "--show-toplevel"], cwd=str(folder))
    return {"commit": commit, "dirty": bool(status), "root": root}


def _driver_version() -> str | None:
    try:
        pynvml: Any = importlib.import_module("pynvml")  # optional: nvidia-ml-py
        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # noqa: BLE001 - no NVML: fall back to nvidia-smi
        pass
    if shutil.which("nvidia-smi") is None:
        return None
    out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return out.splitlines()[0].strip() if out else None


def torch_info() -> dict[str, Any]:
    """torch/CUDA/cuDNN/NCCL versions and the GPUs torch sees (imports torch)."""
    import torch

    backends: Any = torch.backends  # untyped version() functions
    cuda: Any = torch.cuda
    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                            "hip": getattr(torch.version, "hip", None)}
    try:
        info["cudnn"] = backends.cudnn.version()
    except Exception:  # noqa: BLE001 - CPU builds raise or return None
        info["cudnn"] = None
    try:
        info["nccl"] = ".".join(str(x) for x in cuda.nccl.version())
    except Exception:  # noqa: BLE001 - CPU builds have no NCCL
        info["nccl"] = None
    gpus: list[dict[str, Any]] = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            gpus.append({"index": i, "name": p.name, "memory_bytes": int(p.total_memory),
                         "capability": f"{p.major}.{p.minor}"})
    info["gpus"] = gpus
    info["driver"] = _driver_version() if gpus else None
    return info


def host_info(script: str | None, command: list[str]) -> dict[str, Any]:
    """Host, command line, working directory, Python and the script's git commit."""
    return {
        "command": command,
        "cwd": os.getcwd(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "pid": os.getpid(),
        "git": git_info(script) if script and Path(script).exists() else None,
        "env": relevant_env(),
    }
