// launch_decode: checks what the kernels assume, then dispatches on head_dim.
#include "cuda/build_variants.h"
#include "cuda/launch.h"
#include "cuda/decode/common.cuh"

namespace mixed_attn::gpu {
namespace decode {
template <int D>
const char* launch_decode_head_dim(const DecodeParams& p, DecodeKernel kernel, gpuStream_t stream);
}  // namespace decode

namespace {

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

}  // namespace

const char* launch_decode(const DecodeParams& p, void* stream) {
  const AttentionCommon& a = p.attn;
  const bool graph = a.plan.maybe_counts != nullptr;  // graph-safe: launch over the bucket
  if (graph ? a.plan.graph_max_partials == 0 : a.plan.num_decode_rows == 0) return nullptr;
  if (a.q_dtype != DType::kBFloat16 && a.q_dtype != DType::kFloat16) return "decode: q must be bfloat16 or float16";
  if (a.kv_dtype != a.q_dtype && a.kv_dtype != DType::kFloat8E4M3)
    return "decode: the KV cache must have q's dtype or float8_e4m3fn";
  if (a.num_kv_heads < 1 || a.num_qo_heads % a.num_kv_heads != 0)
    return "decode: num_qo_heads must be a multiple of num_kv_heads";
  if (!graph && a.plan.num_decode_rows > 65535)  // grid z (graph-safe grids run over slots)
    return "decode: more than 65535 decode rows in one plan";
  if (a.plan.decode_max_q < 1 || a.plan.decode_max_q > kDecodeMaxQueries)
    return "decode: the plan's decode_max_q is out of range";
  if (a.plan.decode_cta_blocks != 1 && a.plan.decode_cta_blocks != 2 && a.plan.decode_cta_blocks != 4)
    return "decode: the plan's blocks per CTA must be 1, 2 or 4";
  const int kv_pack = a.plan.decode_kv_pack;
  if (kv_pack != 1 && kv_pack != 2) return "decode: the plan's kv heads per CTA must be 1 or 2";
  if (kv_pack == 2 &&
      (DecodeKernel(a.plan.decode_kernel) != DecodeKernel::kTensorCore || a.head_dim != 64 ||
       decode_step_kv_pack(2, a.num_kv_heads, a.plan.decode_max_q, a.num_qo_heads / a.num_kv_heads) != 2))
    return "decode: two kv heads a CTA need the tensor-core kernel at head dim 64, an even num_kv_heads and rows "
           "whose pairs of both heads fit a CTA's MMA blocks";
  if (int64_t(a.num_kv_heads / kv_pack) *
          decode_row_ctas(a.plan.decode_max_q, a.num_qo_heads / a.num_kv_heads * kv_pack, a.plan.decode_cta_blocks) >
      65535)
    return "decode: too many kv heads x (query, head) blocks";
  if ((graph ? a.plan.graph_max_partials > 1 : a.plan.max_splits > 1) &&
      (p.partial_out == nullptr || p.partial_lse == nullptr))
    return "decode: the plan splits rows but no arena (partial_out / partial_lse) was given";
  // 16-byte vector accesses: q rows, cache rows and output runs must be aligned.
  const int64_t kv_align = a.kv_dtype == DType::kFloat8E4M3 ? 16 : 8;
  if (!aligned16(a.q) || !aligned16(a.k_cache) || !aligned16(a.v_cache) || !aligned16(a.out) || a.q_stride_token % 8 ||
      a.q_stride_head % 8 || a.out_stride_token % 4 || a.out_stride_head % 4 || a.k_stride_page % kv_align ||
      a.k_stride_slot % kv_align || a.k_stride_head % kv_align || a.v_stride_page % kv_align ||
      a.v_stride_slot % kv_align || a.v_stride_head % kv_align)
    return "decode: q, out and the KV cache need 16-byte aligned rows";
  // The stage-1 kernel the plan chose: tensor cores (CUDA), or the matrix-free
  // one (HIP; on CUDA an independent second implementation for the tests).
  const DecodeKernel kernel = DecodeKernel(a.plan.decode_kernel);
  if (kernel != DecodeKernel::kPortable && kernel != DecodeKernel::kTensorCore &&
      kernel != DecodeKernel::kTensorCoreNarrow)
    return "decode: the plan was made for another device (its decode kernel is not a GPU kernel)";
#if defined(MA_HIP)
  if (kernel != DecodeKernel::kPortable)
    return "decode: the tensor-core stage 1 is CUDA only; plan with decode_backend='portable'";
#endif
  if (kernel == DecodeKernel::kTensorCoreNarrow &&
      (a.plan.decode_max_q * (a.num_qo_heads / a.num_kv_heads) > kDecodeNarrowPairs || a.plan.decode_cta_blocks != 1))
    return "decode: the plan's decode rows pass the narrow stage 1's 8 (query, head) pairs a CTA";
  const gpuStream_t s = static_cast<gpuStream_t>(stream);
  switch (a.head_dim) {
    case 64: return MA_IF_HD64((decode::launch_decode_head_dim<64>(p, kernel, s)));
    case 128: return MA_IF_HD128((decode::launch_decode_head_dim<128>(p, kernel, s)));
    case 256: return MA_IF_HD256((decode::launch_decode_head_dim<256>(p, kernel, s)));
    default: return "decode: head_dim must be 64, 128 or 256";
  }
}

}  // namespace mixed_attn::gpu
