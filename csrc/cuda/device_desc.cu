// query_device (launch.h) and the driver's TMA-map encoder, looked up once.
#include "cuda/build_variants.h"
#include "cuda/launch.h"
#include "cuda/arch/tma_encoder.h"
#include "mixed_attn/compat.h"

#include <cstring>

namespace mixed_attn::gpu {

#if defined(MA_CUDA)
TensorMapEncodeFn tensor_map_encoder() {
  // Through the runtime's driver entry point, so the extension never links libcuda.
  static const TensorMapEncodeFn fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      return TensorMapEncodeFn(nullptr);
    return reinterpret_cast<TensorMapEncodeFn>(ptr);
  }();
  return fn;
}
#endif

bool build_has_head_dim(int head_dim) { return head_dim_built(head_dim); }
bool build_has_fp8() { return fp8_built(); }

const char* query_device(int device, DeviceDesc* out) {
  DeviceDesc d;
#if defined(MA_HIP)
  if (device < 0 && hipGetDevice(&device) != hipSuccess) return "could not query the current HIP device";
  hipDeviceProp_t prop;
  if (hipGetDeviceProperties(&prop, device) != hipSuccess) return "could not query the HIP device";
  d.kind = DeviceKind::kHip;
  d.num_sms = prop.multiProcessorCount;
  // The extend kernel's MFMA loop is compiled for CDNA2/CDNA3 only (extend/portable/mma.cuh sets
  // MA_EXTEND_HAS_MMA); the launch policy refuses other AMD GPUs.
  const char* arch = prop.gcnArchName;  // e.g. "gfx90a:sramecc+:xnack-"
  d.hip_mfma = std::strncmp(arch, "gfx90a", 6) == 0 || std::strncmp(arch, "gfx94", 5) == 0 ||
               std::strncmp(arch, "gfx95", 5) == 0;
#else
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) return "could not query the current CUDA device";
  int major = 0, minor = 0, sms = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return "could not query the CUDA device's compute capability";
  d.kind = DeviceKind::kCuda;
  d.arch = 10 * major + minor;
  d.num_sms = sms;
#if defined(MA_EXTEND_SM90_BUILT)
  // wgmma and setmaxnreg exist in sm_90a code only, which runs on cc 9.0 alone.
  d.sm90_extend = major == 9 && minor == 0;
#endif
  d.tma_encoder = tensor_map_encoder() != nullptr;
#endif
  *out = d;
  return nullptr;
}

}  // namespace mixed_attn::gpu
