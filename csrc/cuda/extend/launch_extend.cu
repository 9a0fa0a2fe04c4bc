// launch_extend (csrc/cuda/launch.h): runtime -> compile-time dispatch over
// (kernel family, head dim, q dtype, cache dtype), on the kernel the plan chose
// (launch_policy.h). The kernels are instantiated in extend/instantiate_hd{64,128,256}.cu and
// only declared here (extend/instantiations.cuh), so each is compiled once.
#include "cuda/build_variants.h"
#include "cuda/extend/instantiations.cuh"
#include "cuda/launch.h"

#include <cstdint>

namespace mixed_attn::gpu {
namespace {

template <typename T>
const char* dispatch_head_dim(const ExtendParams& p, bool fp8, gpuStream_t stream) {
  using namespace extend_detail;
  const int d = p.attn.head_dim;
  if (p.attn.plan.extend_kernel == int32_t(ExtendKernel::kSm90)) {
#if defined(MA_CUDA) && defined(MA_EXTEND_SM90_BUILT)
    switch (d) {
      case 64:
        return MA_IF_HD64((fp8 ? MA_IF_FP8((launch_extend_sm90_impl<64, extend_sm90_wgs(64), T, true>(p, stream)))
                               : launch_extend_sm90_impl<64, extend_sm90_wgs(64), T, false>(p, stream)));
      case 128:
        // The plan's rows pick the shape (the launcher refuses rows its instantiation was not
        // built for).
#if MA_SM90_D128_WGS == 3
        if (!fp8 && p.attn.plan.extend_block_rows == extend_sm90_alt_block_rows(128))
          return MA_IF_HD128((launch_extend_sm90_impl<128, 2, T, false>(p, stream)));
#endif
        return MA_IF_HD128((fp8 ? MA_IF_FP8((launch_extend_sm90_impl<128, extend_sm90_wgs(128), T, true>(p, stream)))
                                : launch_extend_sm90_impl<128, extend_sm90_wgs(128), T, false>(p, stream)));
      case 256:
        return MA_IF_HD256((fp8 ? MA_IF_FP8((launch_extend_sm90_impl<256, extend_sm90_wgs(256), T, true>(p, stream)))
                                : launch_extend_sm90_impl<256, extend_sm90_wgs(256), T, false>(p, stream)));
      default: return "extend: head_dim must be 64, 128 or 256";
    }
#else
    return "extend: the plan picked the sm90 kernel, which this build does not hold (no sm_90a in its arch list)";
#endif
  }
  if (p.attn.plan.extend_ctas != 0) return "extend: a persistent launch (plan.extend_ctas) needs the sm90 kernel";
  if (p.attn.plan.extend_kernel != int32_t(ExtendKernel::kMma))
    return "extend: the plan was made for another device (its extend kernel is not a GPU kernel)";
  switch (d) {
    case 64:
      return MA_IF_HD64((fp8 ? MA_IF_FP8((launch_extend_impl<64, T, true>(p, stream)))
                             : launch_extend_impl<64, T, false>(p, stream)));
    case 128:
      return MA_IF_HD128((fp8 ? MA_IF_FP8((launch_extend_impl<128, T, true>(p, stream)))
                              : launch_extend_impl<128, T, false>(p, stream)));
    case 256:
      return MA_IF_HD256((fp8 ? MA_IF_FP8((launch_extend_impl<256, T, true>(p, stream)))
                              : launch_extend_impl<256, T, false>(p, stream)));
    default: return "extend: head_dim must be 64, 128 or 256";
  }
}

}  // namespace

const char* launch_extend(const ExtendParams& p, void* stream) {
  const AttentionCommon& a = p.attn;
  // Graph-safe plans launch over the bucket's tiles (the kernels read the step's count).
  if (!extend_launches(p)) return nullptr;
  if (a.num_kv_heads < 1 || a.num_qo_heads % a.num_kv_heads != 0)
    return "extend: num_qo_heads must be a positive multiple of num_kv_heads";
  if (a.plan.extend_tile_tokens < 1) return "extend: plan.extend_tile_tokens must be >= 1";
  if (a.page_size < 1) return "extend: page_size must be >= 1";
  const bool fp8 = a.kv_dtype == DType::kFloat8E4M3;
  if (!fp8 && a.kv_dtype != a.q_dtype) return "extend: kv_dtype must equal q_dtype or be float8_e4m3";
  // Rows are loaded as 16-byte chunks.
  const int64_t align = fp8 ? 16 : 8;
  if (a.q_stride_token % 8 || a.q_stride_head % 8 || a.k_stride_page % align || a.k_stride_slot % align ||
      a.k_stride_head % align || a.v_stride_page % align || a.v_stride_slot % align || a.v_stride_head % align)
    return "extend: q / cache strides must keep every row 16-byte aligned";
  auto misaligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 != 0; };
  if (misaligned(a.q) || misaligned(a.k_cache) || misaligned(a.v_cache))
    return "extend: q, k_cache and v_cache must be 16-byte aligned";
  if (a.out_stride_token % 2 || a.out_stride_head % 2 || reinterpret_cast<uintptr_t>(a.out) % 4)
    return "extend: out rows must be 4-byte aligned";
  auto s = static_cast<gpuStream_t>(stream);
  switch (a.q_dtype) {
    case DType::kBFloat16: return dispatch_head_dim<ma_bf16>(p, fp8, s);
    case DType::kFloat16: return dispatch_head_dim<ma_half>(p, fp8, s);
    default: return "extend: q_dtype must be bfloat16 or float16";
  }
}

}  // namespace mixed_attn::gpu
