// launch_extend / extend_tile_tokens (csrc/cuda/launch.h): runtime -> compile-
// time dispatch over (head dim, q dtype, cache dtype). The kernel itself is in
// extend_kernel.cuh; its instantiations in extend_d{64,128,256}.cu.
#include "cuda/extend_dispatch.cuh"
#include "cuda/extend_kernel.cuh"
#include "cuda/extend_sm90.cuh"
#include "cuda/launch.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#if defined(MA_HIP)
#include <atomic>
#endif

namespace mixed_attn::gpu {
namespace {

#if defined(MA_CUDA)
// Compute capability and SM count of a device, queried once per device (launch_extend
// runs every step: no attribute queries on that path).
struct DeviceInfo {
  bool sm90 = false;
  int num_sms = 0;
};
const DeviceInfo& device_info() {
  constexpr int kMaxDevices = 64;
  static DeviceInfo infos[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    static const DeviceInfo unknown;
    return unknown;
  }
  std::call_once(once[device], [device] {
    int major = 0, minor = 0, sms = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess) {
      infos[device].sm90 = major == 9 && minor == 0;
      infos[device].num_sms = sms;
    }
  });
  return infos[device];
}

// The warp-specialised kernel (extend_sm90.cuh) needs wgmma, i.e. code built for
// sm_90a (MA_EXTEND_SM90_BUILT, set by the build when the arch list has 90a)
// running on a compute-capability 9.0 device. MIXED_ATTN_EXTEND_KERNEL=mma
// forces the portable mma.sync kernel (A/B runs, kill switch).
bool use_sm90_kernel() {
#if defined(MA_EXTEND_SM90_BUILT)
  // Read on every launch (tens of ns) so that tests can run both kernels in one process.
  const char* forced = std::getenv("MIXED_ATTN_EXTEND_KERNEL");
  if (forced != nullptr && std::strcmp(forced, "mma") == 0) return false;
  return device_info().sm90;
#else
  return false;
#endif
}

// MIXED_ATTN_EXTEND_KV_SPLITS=N (1..4) fixes the sm_90a kernel's KV splits per query tile
// (tests, A/B runs); unset or 0: the policy of sm90_kv_splits.
int forced_kv_splits() {
  const char* v = std::getenv("MIXED_ATTN_EXTEND_KV_SPLITS");
  if (v == nullptr) return 0;
  const int n = std::atoi(v);
  return n >= 1 && n <= 4 ? n : 0;
}
#endif

#if defined(MA_HIP)
// The kernel's MFMA loop is compiled for CDNA2/CDNA3 only (extend_mma.cuh sets
// MA_EXTEND_HAS_MMA); built for another AMD GPU its body would be empty, so say
// so instead of returning garbage. The device's architecture name is read once
// per device (launch_extend runs every step).
const char* hip_device_error() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> state[kMaxDevices];  // 0 unknown, 1 CDNA2/3, 2 other
  int device = 0;
  if (hipGetDevice(&device) != hipSuccess || device < 0 || device >= kMaxDevices)
    return "extend: could not query the current HIP device";
  int s = state[device].load(std::memory_order_relaxed);
  if (s == 0) {
    hipDeviceProp_t prop;
    if (hipGetDeviceProperties(&prop, device) != hipSuccess)
      return "extend: could not query the current HIP device";
    const char* arch = prop.gcnArchName;  // e.g. "gfx90a:sramecc+:xnack-"
    const bool cdna = std::strncmp(arch, "gfx90a", 6) == 0 || std::strncmp(arch, "gfx94", 5) == 0 ||
                      std::strncmp(arch, "gfx95", 5) == 0;
    s = cdna ? 1 : 2;
    state[device].store(s, std::memory_order_relaxed);  // racing writers store the same value
  }
  return s == 1 ? nullptr
                : "extend: the HIP kernel needs an AMD CDNA2/CDNA3 GPU (gfx90a, gfx94x) with "
                  "MFMA bf16/fp16 instructions";
}
#endif

template <typename T>
const char* dispatch_head_dim(const ExtendParams& p, bool fp8, gpuStream_t stream) {
  using namespace extend_detail;
#if defined(MA_CUDA)
  if (!fp8 && use_sm90_kernel()) {
    switch (p.attn.head_dim) {
      case 64: return launch_extend_sm90_impl<64, T>(p, stream, device_info().num_sms, forced_kv_splits());
      case 128: return launch_extend_sm90_impl<128, T>(p, stream, device_info().num_sms, forced_kv_splits());
      case 256: return launch_extend_sm90_impl<256, T>(p, stream, device_info().num_sms, forced_kv_splits());
      default: break;
    }
  }
#endif
  switch (p.attn.head_dim) {
    case 64:
      return fp8 ? launch_extend_impl<64, T, true>(p, stream) : launch_extend_impl<64, T, false>(p, stream);
    case 128:
      return fp8 ? launch_extend_impl<128, T, true>(p, stream)
                 : launch_extend_impl<128, T, false>(p, stream);
    case 256:
      return fp8 ? launch_extend_impl<256, T, true>(p, stream)
                 : launch_extend_impl<256, T, false>(p, stream);
    default:
      return "extend: head_dim must be 64, 128 or 256";
  }
}

int block_rows(int head_dim) {
  using namespace extend_detail;
  switch (head_dim) {
    case 64: return block_m<64>();
    case 128: return block_m<128>();
    case 256: return block_m<256>();
    default: return 0;
  }
}

int sm90_block_rows(int head_dim) {
  using namespace extend_detail;
  switch (head_dim) {
    case 64: return Sm90Traits<64>::kBlockM;
    case 128: return Sm90Traits<128>::kBlockM;
    case 256: return Sm90Traits<256>::kBlockM;
    default: return 0;
  }
}

}  // namespace

const char* launch_extend(const ExtendParams& p, void* stream) {
  const AttentionCommon& a = p.attn;
  if (a.plan.num_extend_tiles == 0) return nullptr;
#if defined(MA_HIP)
  if (const char* err = hip_device_error()) return err;
#endif
  if (a.num_kv_heads < 1 || a.num_qo_heads % a.num_kv_heads != 0)
    return "extend: num_qo_heads must be a positive multiple of num_kv_heads";
  if (a.plan.extend_tile_tokens < 1) return "extend: plan.extend_tile_tokens must be >= 1";
  if (a.page_size < 1) return "extend: page_size must be >= 1";
  const bool fp8 = a.kv_dtype == DType::kFloat8E4M3;
  if (!fp8 && a.kv_dtype != a.q_dtype) return "extend: kv_dtype must equal q_dtype or be float8_e4m3";
  // Rows are loaded as 16-byte chunks.
  const int64_t align = fp8 ? 16 : 8;
  if (a.q_stride_token % 8 || a.q_stride_head % 8 || a.k_stride_page % align ||
      a.k_stride_slot % align || a.k_stride_head % align || a.v_stride_page % align ||
      a.v_stride_slot % align || a.v_stride_head % align)
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

int extend_tile_tokens(int head_dim, int group_size) {
  int rows = block_rows(head_dim);
#if defined(MA_CUDA)
  // The tiles of the kernel launch_extend will pick (either kernel runs any tile size correctly).
  if (use_sm90_kernel()) rows = sm90_block_rows(head_dim);
#endif
  if (rows == 0 || group_size < 1) return 64;
  return rows / extend_detail::pack_factor(group_size, rows);
}

}  // namespace mixed_attn::gpu
