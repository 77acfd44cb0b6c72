"""Where steps come from: ``traceforge.step()``, optimizer steps, or top-level module calls.

The first source that fires decides; an explicit ``traceforge.step()`` always wins, because
the script's author said where a step ends. A run in which nothing fires is one step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

EXPLICIT = "traceforge.step()"
OPTIMIZER = "optimizer.step()"
MODULE = "module call"
WHOLE_RUN = "whole run"
_PRIORITY = {EXPLICIT: 3, OPTIMIZER: 2, MODULE: 1}

#: The trackers of captures in progress (innermost last); ``step()`` feeds the last one.
_ACTIVE: list[StepTracker] = []


def step() -> None:
    """Mark the end of one step (an iteration, a request) of the program being captured.

    Outside a capture this does nothing, so scripts can call it unconditionally.
    """
    if _ACTIVE:
        _ACTIVE[-1].boundary(EXPLICIT)


def _compiling() -> bool:
    import torch

    return bool(torch.compiler.is_compiling())


class StepTracker:
    """Turns step evidence into calls of ``on_step(restart)``, remembering the source used.

    ``restart`` is True when a stronger source takes over from a weaker one that already
    fired: what the weaker one called steps were parts of the stronger one's first step.
    """

    def __init__(self, on_step: Callable[[bool], None]) -> None:
        self.on_step = on_step
        self.source: str | None = None
        self.module_name: str | None = None
        self._top: int | None = None  # id() of the first top-level module called
        self._depth = 0
        self._handles: list[Any] = []

    @property
    def description(self) -> str:
        """The source in words, for metadata and the printed summary."""
        if self.source == MODULE:
            return f"{MODULE} ({self.module_name})"
        return self.source or WHOLE_RUN

    def boundary(self, source: str) -> None:
        # A stronger source takes over even after a weaker one fired: in training the first
        # forward call starts before the first optimizer step ends.
        if self.source is None:
            self.source = source
            self.on_step(False)
        elif _PRIORITY[source] > _PRIORITY[self.source]:
            self.source = source
            self.on_step(True)
        elif source == self.source:
            self.on_step(False)

    def install(self, hooks: bool = True) -> None:
        """Start listening; ``hooks`` False leaves only explicit ``step()`` calls."""
        _ACTIVE.append(self)
        if not hooks:
            return
        import torch
        from torch.nn.modules import module as nn_module
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._handles.append(
            register_optimizer_step_post_hook(lambda opt, args, kwargs: self.boundary(OPTIMIZER))
        )

        def pre(mod: torch.nn.Module, args: Any) -> None:
            # Inside a graph dynamo is tracing, counting would be a side effect that breaks
            # the graph; compiled regions are nested calls anyway.
            if _compiling():
                return
            self._depth += 1
            if self._depth != 1:
                return
            if self._top is None:
                self._top = id(mod)
                self.module_name = type(mod).__name__
            elif id(mod) == self._top:
                # The step boundary is the start of the next call, not the end of this one,
                # so that an optimizer step after the first forward can still take over.
                self.boundary(MODULE)

        def post(mod: torch.nn.Module, args: Any, out: Any) -> None:
            if not _compiling():
                self._depth = max(0, self._depth - 1)

        self._handles.append(nn_module.register_module_forward_pre_hook(pre))
        # always_call: a forward that raises must still leave the depth count balanced.
        self._handles.append(nn_module.register_module_forward_hook(post, always_call=True))

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if self in _ACTIVE:
            _ACTIVE.remove(self)
