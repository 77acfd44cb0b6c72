"""The CI gate: `diff --fail-if-slower PCT` fails only beyond the threshold and the noise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import cli_main, ev, make_trace
from traceforge.analyzers.runs.regression import MAD_TO_SIGMA, decide, gate, noise_ns


def test_decision_rule_by_hand() -> None:
    a = np.array([100.0, 102.0, 98.0, 100.0, 101.0])  # median 100, MAD 1
    assert noise_ns(a) == pytest.approx(MAD_TO_SIGMA * 1.0)
    # +10% with noise 2 x 1.4826: slower.
    d = decide(a, a + 10, 5)
    assert d.slower and d.delta_pct == pytest.approx(10.0)
    assert d.noise_ns == pytest.approx(2 * MAD_TO_SIGMA)
    assert d.reason.startswith("SLOWER")
    # +3%: within the 5% threshold.
    d = decide(a, a + 3, 5)
    assert not d.slower and "within the threshold" in d.reason
    # +10% over 5%, but B's steps swing by +-20: within the noise.
    noisy = np.array([90.0, 110.0, 130.0, 110.0, 90.0])  # median 110, MAD 20
    d = decide(a, noisy, 5)
    assert not d.slower and "within the noise" in d.reason
    assert d.noise_ns == pytest.approx(MAD_TO_SIGMA * (1 + 20))
    # Faster is never slower.
    assert not decide(a, a - 50, 0).slower


def test_one_step_means_unknown_noise() -> None:
    d = decide(np.array([100.0]), np.array([120.0]), 10)
    assert d.slower and d.noise_ns is None and "noise unknown" in d.reason
    # One side with steps: its noise alone counts.
    d = decide(np.array([100.0]), np.array([118.0, 122.0, 120.0]), 10)
    assert d.noise_ns == pytest.approx(MAD_TO_SIGMA * 2.0)
    with pytest.raises(ValueError):
        decide(np.array([]), np.array([1.0]), 5)


def steps_trace(durations: list[int], kernel: str, kdur: int) -> Any:
    rows, t = [], 0
    for i, d in enumerate(durations):
        rows.append(ev(f"ProfilerStep#{i}", "user_annotation", t, d, pid=1, tid=1))
        rows.append(ev(kernel, "kernel", t, kdur))
        rows.append(ev("vectorized_elementwise_kernel", "kernel", t + kdur, 10))
        t += d
    return make_trace(rows)


def test_gate_names_what_grew() -> None:
    a = steps_trace([1000, 1010, 990], "sm90_xmma_gemm_bf16", 500)
    b = steps_trace([1300, 1310, 1290], "sm90_xmma_gemm_bf16", 800)
    g = gate(a, b, 10)
    assert g.decision.slower
    assert g.decision.a_median_ns == 1000 and g.decision.b_median_ns == 1300
    assert g.classes.iloc[0]["name"] == "gemm"
    assert g.classes.iloc[0]["delta_us"] == pytest.approx(0.3)
    assert g.kernels.iloc[0]["name"] == "sm90_xmma_gemm_bf16"
    assert len(g.kernels) == 1  # the elementwise kernel did not grow


def test_cli_exit_codes(tmp_path: Path) -> None:
    import orjson

    def write(name: str, durations: list[int]) -> Path:
        events, t = [], 0
        for i, d in enumerate(durations):
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}",
                           "pid": 1, "tid": 1, "ts": t, "dur": d})
            events.append({"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm", "pid": 0,
                           "tid": 7, "ts": t + 1, "dur": d // 2,
                           "args": {"device": 0, "stream": 7}})
            t += d
        p = tmp_path / name
        p.write_bytes(orjson.dumps({"traceEvents": events}))
        return p

    a = write("a.json", [1000, 1010, 990, 1000])
    slow = write("b.json", [1200, 1210, 1190, 1200])
    same = write("c.json", [1010, 990, 1000, 1005])

    # In process through cli.main (its exit codes and error mapping); the subprocess
    # exit status of the CLI is tested once in tests/cli/test_cli_core.py.
    code, out, err = cli_main("diff", str(a), str(slow), "--fail-if-slower", "5",
                              "--format", "json")
    assert code == 1, err
    assert "SLOWER" in err and "Kernels that grew most" in err
    assert out.lstrip().startswith("{")  # stdout stays the diff
    code, _, err = cli_main("diff", str(a), str(same), "--fail-if-slower", "5")
    assert code == 0 and "traceforge gate: ok" in err
    assert cli_main("diff", str(a), str(slow), "--fail-if-slower", "50")[0] == 0
    assert cli_main("diff", str(a), str(slow), "--fail-if-slower", "-1")[0] == 2
