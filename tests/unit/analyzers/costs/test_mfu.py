"""FLOPs utilization per step: exact on a synthetic trace, eager vs compiled on real ones."""

from __future__ import annotations

import functools

import pytest

from tests.conftest import FIXTURES
from tests.unit.analyzers.costs.test_roofline import synthetic
from traceforge.analyzers.costs.devices import peaks_from_dict
from traceforge.analyzers.costs.mfu import mfu
from traceforge.errors import UsageError
from traceforge.formats import load
from traceforge.model import Device, Trace


@functools.lru_cache(maxsize=2)
def _fixture(name: str) -> Trace:
    return load(FIXTURES / f"{name}.pt.trace.json.gz")


def test_hfu_per_step_is_exact() -> None:
    r = mfu(synthetic(steps=True))
    s = r.steps.set_index("step")
    assert list(s.index) == [1, 2]
    # Step 1: a 4096^3 bf16 mm; its GPU window runs from the first kernel of step 1 to the
    # first kernel of step 2 (windows tile the GPU timeline).
    f1 = 2.0 * 4096**3
    window1 = 2_000_100 - 100
    assert s.loc[1, "gflops"] == pytest.approx(f1 / 1e9)
    assert s.loc[1, "time_ms"] == pytest.approx(window1 / 1e6)
    assert s.loc[1, "dtype"] == "bf16" and s.loc[1, "peak_tflops"] == 989.5
    assert s.loc[1, "hfu_pct"] == pytest.approx(100 * f1 / (window1 * 1e-9) / 989.5e12)
    # Step 2 holds unmodelled kernels: its FLOPs are a lower bound, and it says so.
    assert s.loc[2, "modelled_pct"] < 100 and s.loc[1, "modelled_pct"] == 100


def test_model_flops_from_params_and_tokens() -> None:
    t = synthetic(steps=True)
    train = mfu(t, params=1e9, tokens=100).steps.set_index("step")
    infer = mfu(t, params=1e9, tokens=100, training=False).steps.set_index("step")
    assert train.loc[1, "model_gflops"] == 6 * 1e9 * 100 / 1e9
    assert infer.loc[1, "model_gflops"] == 2 * 1e9 * 100 / 1e9
    window1 = (2_000_100 - 100) * 1e-9
    assert train.loc[1, "mfu_pct"] == pytest.approx(100 * 6e11 / window1 / 989.5e12)
    given = mfu(t, model_flops=6e11).steps.set_index("step")
    assert given.loc[1, "mfu_pct"] == pytest.approx(train.loc[1, "mfu_pct"])


def test_measured_peaks_and_dtype_override() -> None:
    m = peaks_from_dict({"schema": "traceforge-peaks/1", "matmul_tflops": {"bf16": 500.0,
                                                                          "fp8": 1000.0}})
    s = mfu(synthetic(steps=True), peaks=m).steps.set_index("step")
    assert s.loc[1, "measured_tflops"] == 500.0
    assert s.loc[1, "hfu_measured_pct"] == pytest.approx(s.loc[1, "hfu_pct"] * 989.5 / 500)
    fp8 = mfu(synthetic(steps=True), dtype="fp8").steps.set_index("step")
    assert fp8.loc[1, "peak_tflops"] == 1979


@pytest.mark.parametrize("kw", [{"model_flops": 1.0, "params": 1.0, "tokens": 1.0},
                                {"params": 1.0}, {"model_flops": -5.0}])
def test_contradicting_options_raise(kw: dict[str, float]) -> None:
    with pytest.raises(UsageError):
        mfu(synthetic(), **kw)  # type: ignore[arg-type]


def test_unknown_device_still_counts_flops() -> None:
    r = mfu(synthetic(Device(0, "Mystery GPU"), steps=True))
    assert r.steps["gflops"].iloc[0] > 0 and r.steps["hfu_pct"].isna().all()
    assert any("achieved rates only" in n for n in r.notes)


def test_flops_from_eager_gives_compiled_the_same_math_and_a_higher_mfu() -> None:
    eager, compiled = _fixture("eager"), _fixture("compiled")
    e = mfu(eager).steps
    alone = mfu(compiled)
    # unknown, not 0: its kernels are graph replays without shapes
    assert alone.steps["gflops"].isna().all() and alone.steps["hfu_pct"].isna().all()
    assert (alone.steps["flops_source"] == "unknown: no shapes recorded").all()
    assert any("--flops-from" in n for n in alone.notes)
    c = mfu(compiled, flops_from=eager).steps
    # Same model, same math: every step of both runs carries the same FLOPs.
    assert e["gflops"].nunique() == 1
    assert (c["gflops"] == e["gflops"].iloc[0]).all()
    assert "eager.pt.trace.json.gz" in c["flops_source"].iloc[0]
    assert (c["dtype"] == "bf16").all() and (e["dtype"] == "bf16").all()
    # The compiled run does that math in a twelfth of the time.
    assert c["hfu_pct"].min() > 5 * e["hfu_pct"].max()
    assert c["time_ms"].max() < e["time_ms"].min()


def test_flops_from_a_trace_without_flops_raises() -> None:
    with pytest.raises(UsageError, match="no modelled FLOPs"):
        mfu(_fixture("eager"), flops_from=_fixture("compiled"))


@pytest.mark.parametrize("name", ["eager", "capture_h200x2.ddp_train.sdpa.rank0"])
def test_mfu_ceiling_keys_are_the_roofline_tables(name: str) -> None:
    """MFU takes only the ceiling key of each activity (``ceiling_keys``), not the whole
    ceilings table the roofline makes (some 20 columns a row): the same key on every row,
    with the datasheet, measured peaks alone, both, and no device."""
    from traceforge.analyzers.costs.activity_work import activity_work, timeline
    from traceforge.analyzers.costs.ceilings import ceiling_keys, resolve_device, with_ceilings

    t = _fixture(name)
    acts, _ = timeline(t)
    k, _ = activity_work(t, acts)
    dev, _ = resolve_device(t, None)
    m = peaks_from_dict({"schema": "traceforge-peaks/1",
                         "matmul_tflops": {"bf16": 500.0, "fp32": 40.0, "tf32": 300.0}})
    for device, measured in ((dev, None), (None, m), (dev, m), (None, None)):
        want = with_ceilings(k, device, measured, 1.0)["ceiling"].to_numpy(dtype=object)
        got = ceiling_keys(k, device, measured)
        assert got.tolist() == want.tolist()
    assert set(ceiling_keys(k, dev, None)) - {""}
