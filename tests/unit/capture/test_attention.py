"""Which attention kernels ran and what a capture mode changed, in the capture table and
the report (issue 25, item 1)."""

from __future__ import annotations

import gzip

import pytest

import traceforge as tf
from tests.conftest import FIXTURES, cli_main
from traceforge.analyzers.names.kernel_names import attention_backend, attention_counts
from traceforge.capture.trace_file import kernel_names


@pytest.mark.parametrize("name,backend", [
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>", "flash"),
    ("flash_fwd_splitkv_kernel", "flash"),
    ("attn_fwd", "flash"),  # AOTriton on ROCm
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)",
     "memory-efficient"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64", "cudnn"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 7, false>", "math"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>", "math"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8", None),
    ("nvjet_sm90_tst_24x64_64x16_4x1_v_bz_bias_TNN", None),
])
def test_attention_backend_from_the_name(name: str, backend: str | None) -> None:
    assert attention_backend(name) == backend


@pytest.mark.parametrize("mode,want", [("eager", "math"), ("sdpa", "cudnn"), ("fa2", "flash")])
def test_each_modes_attention_kernels(mode: str, want: str) -> None:
    p = FIXTURES / f"capture_h100.policy_infer.{mode}.pt.trace.json.gz"
    names = kernel_names(gzip.decompress(p.read_bytes()))
    # Oracle: the parsed trace's kernels, name by name.
    t = tf.load(p)
    k = t.events.loc[t.events["kind"] == "kernel", "name"].astype(str).value_counts()
    assert sum(names.values()) == int(k.sum())
    assert names == {str(a): int(b) for a, b in k.items()}
    assert list(attention_counts(names)) == [want]


def test_report_says_what_the_mode_changed_and_which_attention_ran(tmp_path: object) -> None:
    rep = tf.report(tf.load(FIXTURES / "capture_h100.policy_infer.eager.pt.trace.json.gz"))
    notes = rep.runs[0].notes
    assert any("captured in mode eager" in n and "math backend" in n for n in notes)
    assert "attention kernels: math (softmax) 152" in notes


def test_help_says_which_mode_is_the_script_as_written() -> None:
    code, out, err = cli_main("capture", "-h")
    assert code == 0, err
    assert "sdpa: the script as written" in " ".join(out.split())


def test_capture_table_has_the_attention_column_and_what_each_mode_changed() -> None:
    from traceforge.analyzers.names.kernel_names import attention_text
    from traceforge.commands.capture import kernel_names_of, mode_notes

    summaries = []
    for mode in ("eager", "fa2"):
        p = FIXTURES / f"capture_h100.policy_infer.{mode}.pt.trace.json.gz"
        meta = tf.load(p).meta.extra["traceforge"]
        summaries.append({"mode": meta["mode"], "trace": {
            "kernel_names": kernel_names(gzip.decompress(p.read_bytes()))}})
    assert [attention_text(kernel_names_of(s)) for s in summaries] == [
        "math (softmax) 152", "flash 288"]
    notes = mode_notes(summaries)
    assert any(n.startswith("eager changed: ") and "math backend" in n for n in notes)
    assert any(n.startswith("fa2 changed: ") for n in notes)
    assert kernel_names_of({"trace": None}) == {}  # a failed run wrote no trace
