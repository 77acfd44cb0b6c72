"""Kernel classification and name decoding on real kernel names from our fixtures."""

from __future__ import annotations

import pytest

from traceforge.analyzers.kernel_names import classify, fused_ops, short_name

CASES = [
    ("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN", "gemm", "nvjet_sm90"),
    ("nvjet_tst_128x64_64x8_1x2_h_bz_TNT", "gemm", "nvjet_tst"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "gemm",
     "sm90_xmma"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_64x2_tn_align2>"
     "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_64x2_tn_align2::Params)", "gemm",
     "cutlass"),
    ("void gemmSN_NN_kernel<float, 256, 4, 2, 8, 4, 4, false>(cublasGemmSmallNParams<float>)",
     "gemm", "gemmSN"),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x16x128_MI16x16x1_SN_LDSB1", "gemm",
     "Cijk"),
    ("triton_tem_fused_addmm_gelu_t_view_35", "gemm", "triton_tem_fused"),
    ("triton_poi_fused_cat_split_transpose_view_27", "triton", "triton_poi_fused"),
    ("triton_red_fused_add_addmm_mul_native_layer_norm_split_unsqueeze_view_5", "triton",
     "triton_red_fused"),
    ("triton_per_fused_add_native_layer_norm_view_37", "triton", "triton_per_fused"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4>>"
     "(Flash_fwd_params)",
     "attention", "flash_attn"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1"
     "_kernel0_0", "attention", "cudnn_sdpa"),
    ("fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
     "attention", "fmha"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication",
     "nccl"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
     "communication", "nccl"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"
     "(int, float, c10::BFloat16 const*)", "norm", "norm"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int)",
     "elementwise", "elementwise"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(float)", "reduction",
     "reduction"),
    ("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, float, 7>(c10::BFloat16*)",
     "reduction", "softmax"),
    ("cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", "conv", "conv"),
]


@pytest.mark.parametrize(("name", "cls", "family"), CASES)
def test_classify(name: str, cls: str, family: str) -> None:
    k = classify(name)
    assert (k.cls, k.family) == (cls, family)


def test_short_names() -> None:
    assert short_name(
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, "
        "float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*)"
    ) == "vectorized_layer_norm_kernel"
    assert short_name(CASES[3][0]) == (
        "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_64x2_tn_align2"
    )
    assert short_name("triton_poi_fused_add_view_39") == "triton_poi_fused_add_view_39"
    assert short_name("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)") == (
        "ncclDevKernel_Generic"
    )


def test_decoded_details() -> None:
    assert classify(CASES[0][0]).detail == "tile 128x256, k64 x4 stages, cluster 2x1"
    assert classify(CASES[5][0]).detail == "macro tile 128x16x128"
    assert classify(CASES[13][0]).detail == "AllReduce"
    assert fused_ops("triton_tem_fused_add_addmm_native_layer_norm_t_view_33") == [
        "add", "addmm", "native_layer_norm", "t", "view"
    ]
    assert fused_ops("triton_poi_fused__scaled_dot_product_cudnn_attention_cat_split_view_15") == [
        "_scaled_dot_product_cudnn_attention", "cat", "split", "view"
    ]
