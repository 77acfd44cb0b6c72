"""Execution modes: what traceforge changes in torch before the target runs, and undoes after.

    eager     torch.compile -> no-op (dynamo disabled); SDPA -> unfused math backend
    sdpa      torch.compile -> no-op; SDPA keeps its default dispatch
    fa2       torch.compile -> no-op; SDPA -> FlashAttention-2 only (+ flash_attn for HF models)
    compiled  torch.compile runs, with --compile-mode for calls that set no mode

Every change is written down in :class:`ModeState.actions`, which goes into the trace
metadata and is printed, so a trace says what was done to produce it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ModeState:
    """What a mode did, plus the compile counters read while the target ran."""

    mode: str
    compile_mode: str | None = None
    actions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    compile_calls: int = 0
    _graphs0: int = 0
    _breaks0: int = 0

    def compile_counts(self) -> tuple[int, int]:
        """(graphs compiled, graph breaks) since the mode was applied."""
        graphs, breaks = dynamo_counters()
        return graphs - self._graphs0, breaks - self._breaks0

    def finish(self) -> None:
        """Add the warnings that only the end of the run can tell."""
        if self.mode == "compiled" and self.compile_counts()[0] == 0:
            self.warnings.append(
                "compiled mode, but the script compiled nothing (no torch.compile call ran)"
            )

    def as_dict(self) -> dict[str, Any]:
        graphs, breaks = self.compile_counts()
        out: dict[str, Any] = {
            "mode": self.mode,
            "actions": list(self.actions),
            "torch_compile_calls": self.compile_calls,
        }
        if self.mode == "compiled":
            out.update(compile_mode=self.compile_mode, graphs=graphs, graph_breaks=breaks)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def dynamo_counters() -> tuple[int, int]:
    """(unique graphs compiled, graph breaks) from dynamo's process-wide counters."""
    try:
        from torch._dynamo.utils import counters
    except Exception:  # noqa: BLE001 - dynamo absent or broken: nothing was compiled
        return 0, 0
    graphs = int(counters["stats"].get("unique_graphs", 0))
    breaks = int(sum(counters["graph_break"].values()))
    return graphs, breaks


def _no_compile(state: ModeState) -> Callable[..., Any]:
    """A stand-in for torch.compile that returns what it was given, also as a decorator."""

    def compile(model: Any = None, **kwargs: Any) -> Any:  # noqa: A001 - mirrors torch.compile
        state.compile_calls += 1
        if model is None:
            return lambda fn: fn
        return model

    return compile


def _with_default_mode(real: Callable[..., Any], state: ModeState) -> Callable[..., Any]:
    """torch.compile that fills in ``mode`` where the script set neither mode nor options."""

    @functools.wraps(real)
    def compile(model: Any = None, **kwargs: Any) -> Any:  # noqa: A001
        state.compile_calls += 1
        if kwargs.get("mode") is None and not kwargs.get("options"):
            kwargs["mode"] = state.compile_mode
        return real(model, **kwargs) if model is not None else real(**kwargs)

    return compile


@contextlib.contextmanager
def _patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    # On a class, take the raw attribute: getattr would give a bound method, and putting
    # that back would turn a classmethod into a method bound to this one class.
    old = vars(obj)[name] if isinstance(obj, type) and name in vars(obj) else getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def _hf_flash_attention(stack: contextlib.ExitStack, state: ModeState) -> None:
    """Make Hugging Face models default to flash_attention_2 when flash_attn is installed."""
    if importlib.util.find_spec("flash_attn") is None:
        state.actions.append("flash_attn not installed: Hugging Face models keep their attention")
        return
    if importlib.util.find_spec("transformers") is None:
        state.actions.append("flash_attn installed; transformers absent")
        return
    transformers: Any = importlib.import_module("transformers")
    base = transformers.PreTrainedModel
    real = base.from_pretrained.__func__

    @classmethod  # type: ignore[misc]
    def from_pretrained(cls: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("attn_implementation", "flash_attention_2")
        return real(cls, *args, **kwargs)

    stack.enter_context(_patched(base, "from_pretrained", from_pretrained))
    state.actions.append('Hugging Face from_pretrained -> attn_implementation="flash_attention_2"')


@contextlib.contextmanager
def apply_mode(mode: str, compile_mode: str = "default") -> Iterator[ModeState]:
    """Apply ``mode`` to torch for the duration of the block (torch imported here, lazily)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    state = ModeState(mode, compile_mode if mode == "compiled" else None)
    state._graphs0, state._breaks0 = dynamo_counters()
    with contextlib.ExitStack() as stack:
        if mode == "compiled":
            stack.enter_context(
                _patched(torch, "compile", _with_default_mode(torch.compile, state))
            )
            state.actions.append(
                f"torch.compile runs; mode={compile_mode!r} where the script sets none"
            )
        else:
            # Both: the stub keeps the uncompiled module (no OptimizedModule wrapper), and
            # the dynamo switch also covers nn.Module.compile and torch._dynamo.optimize.
            import torch._dynamo

            stack.enter_context(_patched(torch, "compile", _no_compile(state)))
            stack.enter_context(_patched(torch._dynamo.config, "disable", True))
            state.actions.append("torch.compile -> no-op (dynamo disabled)")
        if mode == "eager":
            stack.enter_context(sdpa_kernel(SDPBackend.MATH))
            state.actions.append("scaled_dot_product_attention -> math backend (unfused)")
        elif mode == "fa2":
            stack.enter_context(sdpa_kernel(SDPBackend.FLASH_ATTENTION))
            state.actions.append("scaled_dot_product_attention -> FlashAttention-2 backend only")
            _hf_flash_attention(stack, state)
        elif mode == "sdpa":
            state.actions.append("scaled_dot_product_attention: default dispatch")
        yield state
