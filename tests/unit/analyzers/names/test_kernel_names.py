"""Kernel classification and name decoding on real kernel names from our fixtures."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, SHARED, shared
from tests.corpus.test_all_fixtures import _files, _is_trace
from traceforge import load
from traceforge.analyzers.names.kernel_names import classify, display_names, fused_ops, short_name
from traceforge.analyzers.timing.kernels import top_kernels

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
    assert short_name(
        "void laplacian_kernel<double>(double*, double const*, int, int, int, double, double, "
        "double, double) [clone .kd]") == "laplacian_kernel"


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


def test_amd_code_object_suffixes_on_a_real_rocprof_csv() -> None:
    # GIVEN the kernel names of a legacy rocprof results.csv, read with the csv module
    path = shared("external/hpctrainingexamples/finite-difference/results.csv")
    with path.open() as f:
        raw = {row["KernelName"] for row in csv.DictReader(f)}
    assert any(n.endswith("[clone .kd]") for n in raw)
    # THEN short names drop "[clone .kd]" and ".kd", and keep what the kernel is called
    assert {short_name(n) for n in raw} == {
        "laplacian_kernel", "check_kernel", "test_function_kernel",
        "__amd_rocclr_fillBufferAligned"}
    assert short_name("void foo<int>(int) (.kd)") == "foo"  # LLVM's spelling of the suffix
    assert short_name("attn_fwd.kd") == "attn_fwd"


AMD_TRACES = (
    "external/hpctrainingexamples/finite-difference/results.csv",
    "external/hpctrainingexamples/finite-difference/results.db",
    "external/tracelens/rocprof/908_results.json.gz",  # rocprofv3 JSON
    "external/aorta/smci350-zts-gtu-c6-25_200691.1758927066581847260.pt.trace.json",  # MI350
    "external/kokkos_rocprof/6f0a1c4a/results.json",
)


@pytest.mark.parametrize("rel", AMD_TRACES)
def test_no_table_row_reads_kd(rel: str) -> None:
    t = load(shared(rel), kinds=("kernel",))
    names = top_kernels(t)["name"].tolist()
    assert names and not [n for n in names if n.endswith(("]", ".kd", ")"))], rel


def test_tensile_short_form() -> None:
    assert short_name(
        "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1"
    ) == "Cijk_Alik_Bljk_SB MT64x16x32"
    assert short_name(
        "Cijk_Ailk_Bljk_BBS_BH_MT256x112x32_MI16x16x16x1_SN_1LDSB0_APM1_AF0EM1_WG32_8_1.kd"
    ) == "Cijk_Ailk_Bljk_BBS_BH MT256x112x32"
    assert short_name("Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x256_MI16x16x1_SN"
                      ) == "Cijk_Alik_Bljk_B_BS_BH MT16x16x256"


def test_wrappers_and_return_types() -> None:
    assert short_name(
        "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, "
        "float, float, false, true, false, false, 7, cublasGemvParams<float> >"
        "(cublasGemvParams<float>)") == "gemvx::kernel"
    assert short_name(
        "void ck_tile::kentry<1, ck_tile::Rmsnorm2dFwd<ck_tile::Rmsnorm2dFwdPipelineOnePass<int>"
        " > >(ck_tile::Rmsnorm2dFwd<int>::Kargs)") == "Rmsnorm2dFwd"
    assert short_name(
        "void rocprim::detail::trampoline_kernel<rocprim::default_config, rocprim::detail::"
        "reduce_config_selector<bool>, rocprim::detail::reduce_impl<true, int>(void*)::"
        "{lambda(auto:1)#1}>(int)") == "reduce_impl"
    assert short_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD (Device -> Device)"
    assert short_name("__omp_offloading_fd00_4a3d1f_main_l52") == "main_l52 (omp)"
    assert short_name("__omp_offloading_10302_b4fd1e_void axpy<double>(double, double*, "
                      "double*, int)_l12") == "axpy_l12 (omp)"


VEC = ("void at::native::vectorized_elementwise_kernel<4, at::native::{}, "
       "std::array<char*, {}ul> >(int)")
LAMBDA = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::"
          "native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{{lambda()#3}}::operator()() "
          "const::{{lambda()#{}}}::operator()() const::{{lambda({})#1}}>(at::TensorIteratorBase&)::"
          "{{lambda(int)#1}}>(int)")


def test_display_names_tell_colliding_short_names_apart() -> None:
    names = [VEC.format("CUDAFunctor_add<float>", 3), VEC.format("FillFunctor<float>", 1),
             VEC.format("FillFunctor<c10::BFloat16>", 1),
             VEC.format("BinaryFunctor<float, float, float, at::native::MulFunctor<float> >", 3),
             VEC.format("BinaryFunctor<float, float, float, at::native::DivFunctor<float> >", 3),
             LAMBDA.format(7, "float"), LAMBDA.format(12, "c10::BFloat16"),
             "nvjet_sm90_tst_24x64_64x16_4x1_v_bz_bias_TNN"]
    d = display_names(names)
    assert [d[n] for n in names] == [
        "vectorized_elementwise_kernel<CUDAFunctor_add>",
        "vectorized_elementwise_kernel<FillFunctor<float>>",
        "vectorized_elementwise_kernel<FillFunctor<BFloat16>>",
        "vectorized_elementwise_kernel<BinaryFunctor<MulFunctor>>",
        "vectorized_elementwise_kernel<BinaryFunctor<DivFunctor>>",
        "elementwise_kernel<direct_copy_kernel_cuda(float)>",
        "elementwise_kernel<direct_copy_kernel_cuda(BFloat16)>",
        "nvjet_sm90_tst_24x64_64x16_4x1_v_bz_bias_TNN",
    ]
    # A lone kernel keeps its short name; the same name twice is one entry.
    assert display_names([names[0], names[0]]) == {names[0]: "vectorized_elementwise_kernel"}


def test_display_names_of_values_tensile_and_last_resort() -> None:
    wgrad = "void wgrad_alg0_engine<float, 128, {}, {}, 3, 3, {}, false, 512>(int, int)"
    names = [wgrad.format(5, 5, 3), wgrad.format(6, 7, 5), wgrad.format(6, 8, 5)]
    assert [display_names(names)[n] for n in names] == [
        "wgrad_alg0_engine<5>", "wgrad_alg0_engine<6, 7>", "wgrad_alg0_engine<6, 8>"]
    cijk = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_{}_{}"
    tensile = [cijk.format("GSUAMB", "ULSGRO0"), cijk.format("GSUAMB", "ULSGRO1"),
               cijk.format("GSUAMBSK", "ULSGRO0")]
    assert [display_names(tensile)[n] for n in tensile] == [
        "Cijk_Alik_Bljk_BBS_BH MT256x192x64 GSUAMB_ULSGRO0",
        "Cijk_Alik_Bljk_BBS_BH MT256x192x64 ULSGRO1",
        "Cijk_Alik_Bljk_BBS_BH MT256x192x64 GSUAMBSK"]
    # Overloads that differ only in their parameters are numbered.
    same = ["void k<int>(int)", "void k<int>(float)"]
    assert sorted(display_names(same).values()) == ["k", "k #2"]


# Families a reader can tell from the name alone, written without traceforge's rules.
KNOWN_FAMILIES = (
    (r"^nvjet_sm90_", "gemm", "nvjet_sm90"),
    (r"^Cijk_A", "gemm", "Cijk"),
    (r"^triton_poi_fused_", "triton", "triton_poi_fused"),
    (r"^triton_red_fused_", "triton", "triton_red_fused"),
    (r"^triton_per_fused_", "triton", "triton_per_fused"),
    (r"^ncclDevKernel_(AllReduce|AllGather|ReduceScatter|SendRecv|Generic)", "communication",
     "nccl"),
    (r"^void pytorch_flash::flash_fwd", "attention", "flash_attn"),
    (r"vectorized_layer_norm_kernel<", "norm", "norm"),
    (r"^void at::native::vectorized_elementwise_kernel<\d+, at::native::(CUDAFunctor_add|"
     r"FillFunctor)<", "elementwise", "elementwise"),
    (r"^__amd_rocclr_fillBuffer", "memset", "memset"),
    (r"^__amd_rocclr_copyBuffer", "memcpy", "memcpy"),
    (r"^void cutlass::Kernel2?<cutlass_\d+_", "gemm", "cutlass"),
)


def _real_traces() -> list[Path]:
    ours = sorted(FIXTURES.glob("*.json.gz"))
    return ours + [p for p in _files() if _is_trace(p)]


@pytest.mark.parametrize(
    "path", _real_traces(),
    ids=lambda p: str(p.relative_to(SHARED) if p.is_relative_to(SHARED) else p.name))
def test_names_of_every_real_trace(path: Path) -> None:
    t = load(path, kinds=("kernel",))
    names = sorted(set(t.kernels()["name"].astype(str)))
    # classify reads every name, and keeps known families where they belong
    for n in names:
        k = classify(n)
        for pattern, cls, fam in KNOWN_FAMILIES:
            if re.search(pattern, n):
                assert (k.cls, k.family) == (cls, fam), n
    # a code-object suffix never changes what a kernel is
    for n in names:
        bare = re.sub(r"(\s*\[clone [^\]]*\]|\.kd)$", "", n)
        b, k = classify(bare), classify(n)
        assert (b.cls, b.family) == (k.cls, k.family), n
    # no two different full names share a display name in top-kernels
    table = top_kernels(t)
    assert table["name"].is_unique and table["full_name"].is_unique
    assert len(table) == len(names)
