"""Step selection on a hand-built trace: GPU rows follow their launch call's step."""

from __future__ import annotations

import pytest

from tests.conftest import ev, make_trace
from traceforge.analyzers.timeline.core import select_steps
from traceforge.errors import AnalysisError


def _trace():  # type: ignore[no-untyped-def]
    return make_trace([
        ev("ProfilerStep#1", "user_annotation", ts=0, dur=100, pid=1, tid=1),
        ev("ProfilerStep#2", "user_annotation", ts=100, dur=100, pid=1, tid=1),
        ev("cudaLaunchKernel", "runtime", ts=90, dur=5, pid=1, tid=1, corr=7),
        ev("late_kernel", "kernel", ts=150, dur=10, corr=7),  # runs in step 2's time
        ev("cudaLaunchKernel", "runtime", ts=120, dur=5, pid=1, tid=1, corr=8),
        ev("k2", "kernel", ts=130, dur=10, corr=8),
        ev("unlinked", "kernel", ts=105, dur=1),  # no launch call: its own start counts
    ])


def test_gpu_rows_belong_to_the_step_that_launched_them() -> None:
    s1 = select_steps(_trace(), [1])
    assert sorted(s1.events["name"].astype(str)) == ["ProfilerStep#1", "cudaLaunchKernel",
                                                     "late_kernel"]
    s2 = select_steps(_trace(), [2])
    assert sorted(s2.kernels()["name"].astype(str)) == ["k2", "unlinked"]
    assert len(select_steps(_trace()).events) == len(_trace().events)


def test_unknown_step_is_an_error() -> None:
    with pytest.raises(AnalysisError, match="no step 5"):
        select_steps(_trace(), [5])
