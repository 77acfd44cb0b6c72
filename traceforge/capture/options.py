"""What one capture run is asked to do: mode, backend, steps, output folder, profiler flags."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from traceforge.errors import UsageError

#: Modes in the order ``--mode all`` runs them.
MODES: tuple[str, ...] = ("eager", "sdpa", "fa2", "compiled")
#: torch.compile modes traceforge applies to calls that set none.
COMPILE_MODES: tuple[str, ...] = ("default", "reduce-overhead", "max-autotune")
#: Profiler backends; ``torch`` runs in-process, the others wrap the target in a profiler.
BACKEND_NAMES: tuple[str, ...] = ("torch", "nsys", "rocprof", "ncu")


@dataclass(frozen=True)
class Steps:
    """The torch.profiler schedule: skip ``wait`` steps, warm ``warmup``, record ``active``."""

    wait: int = 1
    warmup: int = 1
    active: int = 2

    @property
    def recorded(self) -> range:
        """0-based indices of the steps that land in the trace."""
        start = self.wait + self.warmup
        return range(start, start + self.active)

    def __str__(self) -> str:
        return f"{self.wait},{self.warmup},{self.active}"


#: Five recorded steps by default: enough for a median and the outlier test
#: (traceforge.step_time), the first of them usually inflated by profiler start-up; two
#: warm-up steps so that the profiler's own start-up falls outside the window as far as
#: it can. Every step after the window runs unprofiled and gives the run's step time.
#: Compiled mode waits longer: dynamo compiles on the first call, and reduce-overhead
#: records its CUDA graphs on the next ones; none of that belongs in the trace.
#: Cost: the trace grows with the recorded steps, 5/2 of the old 2-step default (the
#: bundled h100-eager sample: 0.84 MB for 2 steps, about 2.1 MB for 5).
DEFAULT_STEPS = Steps(2, 2, 5)
COMPILED_STEPS = Steps(5, 2, 5)


def parse_steps(text: str) -> Steps:
    """``"WAIT,WARMUP,ACTIVE"`` -> Steps, with one-line errors for anything else."""
    parts = text.split(",")
    try:
        wait, warmup, active = (int(p) for p in parts)
    except ValueError:
        raise UsageError(
            f"--steps wants WAIT,WARMUP,ACTIVE as three integers, got {text!r}"
        ) from None
    if min(wait, warmup) < 0 or active < 1:
        raise UsageError(f"--steps {text}: WAIT and WARMUP must be >= 0 and ACTIVE >= 1")
    if wait == 0 and warmup > 0:
        # Step 0 doubles as the "whole run is one step" recording, so it cannot warm up.
        raise UsageError(f"--steps {text}: WARMUP needs WAIT >= 1 (step 0 may be the whole run)")
    return Steps(wait, warmup, active)


def parse_modes(text: str) -> tuple[str, ...]:
    """``"eager,fa2"`` or ``"all"`` -> modes in the given order, each checked."""
    if text.strip() == "all":
        return MODES
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise UsageError(f"unknown --mode {','.join(bad) or text!r} (choose from "
                         f"{', '.join(MODES)} or all, comma-separated)")
    if len(set(modes)) != len(modes):
        raise UsageError(f"--mode {text}: a mode is named twice")
    return modes


@dataclass(frozen=True)
class CaptureOptions:
    """Everything a capture needs besides the target."""

    mode: str = "sdpa"
    backend: str = "torch"
    out: Path = Path("traceforge-out")
    steps: Steps | None = None  # None: DEFAULT_STEPS, or COMPILED_STEPS in compiled mode
    record_shapes: bool = True
    with_stack: bool = False
    memory: bool = False
    memory_snapshot: bool = False  # a torch.cuda.memory snapshot of the recorded window
    compile_mode: str = "default"
    name: str = "capture"  # file stem: the script's name for CLI runs
    profiler_path: str | None = None  # --nsys PATH
    batch: float | None = None  # samples per GPU per step (--batch), for samples/s
    tokens: float | None = None  # tokens per GPU per step (--tokens-per-step), for tokens/s
    extra: dict[str, str] = field(default_factory=dict)

    def schedule(self) -> Steps:
        if self.steps is not None:
            return self.steps
        return COMPILED_STEPS if self.mode == "compiled" else DEFAULT_STEPS

    def check(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"unknown mode {self.mode!r} (choose from {', '.join(MODES)})")
        # "nvtx" is the in-process half of the nsys and rocprof backends.
        if self.backend not in (*BACKEND_NAMES, "nvtx"):
            raise UsageError(
                f"unknown backend {self.backend!r} (choose from {', '.join(BACKEND_NAMES)})"
            )
        if self.compile_mode not in COMPILE_MODES:
            raise UsageError(f"unknown compile mode {self.compile_mode!r} "
                             f"(choose from {', '.join(COMPILE_MODES)})")


def to_args(opts: CaptureOptions, mode: str | None = None) -> list[str]:
    """The ``traceforge capture`` options that reproduce ``opts`` in a child process."""
    args = ["--mode", mode or opts.mode, "--backend", opts.backend, "-o", str(opts.out),
            "--name", opts.name, "--compile-mode", opts.compile_mode,
            "--record-shapes" if opts.record_shapes else "--no-record-shapes"]
    if opts.steps is not None:
        args += ["--steps", str(opts.steps)]
    if opts.with_stack:
        args.append("--with-stack")
    if opts.memory:
        args.append("--memory")
    if opts.batch is not None:
        args += ["--batch", repr(opts.batch)]
    if opts.tokens is not None:
        args += ["--tokens-per-step", repr(opts.tokens)]
    if opts.memory_snapshot:
        args.append("--memory-snapshot")
    if opts.profiler_path:
        args += ["--nsys" if opts.backend == "nsys" else "--rocprof", opts.profiler_path]
    return args
