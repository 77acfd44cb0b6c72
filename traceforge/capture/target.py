"""The command after ``--``: a Python script or module to run in-process, or a torchrun launch.

``python infer.py ARGS`` and ``infer.py ARGS`` both name a script; ``python -m pkg ARGS`` a
module; ``torchrun OPTS train.py ARGS`` (or ``python -m torch.distributed.run ...``) a
launch whose workers each run traceforge capture in-process.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from traceforge.errors import UsageError

#: torchrun options that take no value; every other option consumes the next word
#: unless it is written ``--opt=value``.
_TORCHRUN_FLAGS = frozenset({"--standalone", "--run-path", "--run_path"})


@dataclass(frozen=True)
class Target:
    """A Python program to run: a script path or a module name, plus its arguments."""

    path: str  # script path, or module name when is_module
    args: tuple[str, ...] = ()
    is_module: bool = False

    @property
    def argv(self) -> list[str]:
        """``sys.argv`` as the program would see it under plain ``python``."""
        return [self.path, *self.args]

    @property
    def stem(self) -> str:
        """A file-name stem for its outputs: ``infer`` for infer.py, ``pkg.mod`` for -m."""
        return self.path if self.is_module else Path(self.path).stem

    def command(self) -> list[str]:
        """The words that run it with a Python interpreter (after ``python``)."""
        return (["-m", self.path] if self.is_module else [self.path]) + list(self.args)


@dataclass(frozen=True)
class Launch:
    """A torchrun launch: its own options, and the program every rank runs."""

    launcher: tuple[str, ...]  # e.g. ("torchrun",) or ("python", "-m", "torch.distributed.run")
    options: tuple[str, ...]
    target: Target


def _is_python(word: str) -> bool:
    name = os.path.basename(word)
    return name.startswith("python") and not name.endswith(".py")


def torch_missing(words: Sequence[str]) -> str | None:
    """Why capture cannot run here, in one line, when this Python has no torch (the
    target runs in traceforge's own interpreter, and every mode sets torch up); None when
    it has. ``words``: the command after ``--``, whose interpreter the line names when it
    is another one (the Python the user meant the script to run in)."""
    import importlib.util

    try:
        if importlib.util.find_spec("torch") is not None:
            return None
    except (ImportError, ValueError):  # ValueError: torch set to None in sys.modules
        pass
    here = sys.executable or "this Python"
    named = shutil.which(words[0]) if words and _is_python(words[0]) else None
    other = named if named and os.path.realpath(named) != os.path.realpath(here) else None
    py = other or "PYTHON"
    return (f"{here} has no torch (capture runs the script in traceforge's own Python): "
            "install torch here (pip install 'traceforge[torch]'), or run capture with "
            f"the Python that has torch{' (the script names ' + other + ')' if other else ''}: "
            f"{py} -m pip install traceforge && {py} -m traceforge capture ...")


def parse_python(words: list[str]) -> Target:
    """``[python] (SCRIPT | -m MODULE) ARGS...`` -> Target."""
    if words and _is_python(words[0]):
        words = words[1:]
        # Interpreter flags such as -u or -X dev change nothing in-process; skip them.
        while words and words[0].startswith("-") and words[0] != "-m":
            words = words[2:] if words[0] in ("-X", "-W") else words[1:]
    if not words:
        raise UsageError("no target: put the command after --, e.g. -- python infer.py")
    if words[0] == "-m":
        if len(words) < 2:
            raise UsageError("-m needs a module name")
        return Target(words[1], tuple(words[2:]), is_module=True)
    if words[0].startswith("-"):
        raise UsageError(f"{words[0]}: not a traceforge capture option, nor a Python option it "
                         "supports (put the program after --: -- python SCRIPT ARGS)")
    if not words[0].endswith(".py") and not Path(words[0]).is_file():
        raise UsageError(
            f"{words[0]}: not a Python script; traceforge capture runs Python programs "
            "(python SCRIPT, python -m MODULE or torchrun)"
        )
    return Target(words[0], tuple(words[1:]))


def parse_launch(words: list[str]) -> Launch | None:
    """A torchrun launch, or None when ``words`` start any other way."""
    if not words:
        return None
    if os.path.basename(words[0]) == "torchrun":
        launcher: tuple[str, ...] = (words[0],)
        rest = words[1:]
    elif (len(words) >= 3 and _is_python(words[0]) and words[1] == "-m"
          and words[2] == "torch.distributed.run"):
        launcher = tuple(words[:3])
        rest = words[3:]
    else:
        return None
    opts: list[str] = []
    module = False
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        word = rest[i]
        if word in ("-m", "--module"):
            module = True
        elif word in ("--no-python", "--no_python"):
            raise UsageError("torchrun --no-python runs no Python program to profile")
        else:
            opts.append(word)
            if "=" not in word and word not in _TORCHRUN_FLAGS:
                i += 1
                if i < len(rest):
                    opts.append(rest[i])
        i += 1
    prog = rest[i:]
    if not prog:
        raise UsageError("torchrun: no training script after its options")
    target = Target(prog[0], tuple(prog[1:]), is_module=True) if module else parse_python(prog)
    return Launch(launcher, tuple(opts), target)
