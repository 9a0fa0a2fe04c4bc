// torch.ops.mixed_attn.build_info(): what this binary was built for, as "key=value" strings
// (python/mixed_attn/buildinfo.py reads them). The values come from the generated header that
// CMakeLists.txt writes into the build folder, so they describe this very binary.
#include <string>
#include <vector>

#include <torch/library.h>

#include "mixed_attn_build_info.h"

namespace mixed_attn {
namespace {

std::vector<std::string> build_info_op() {
  return {
      std::string("backend=") + MA_BUILD_BACKEND,            // CUDA, HIP or NONE
      std::string("gpu_archs=") + MA_BUILD_GPU_ARCHS,        // CMake syntax, comma-separated
      std::string("torch=") + MA_BUILD_TORCH_VERSION,        // torch.__version__ at build time
      std::string("torch_cuda=") + MA_BUILD_TORCH_CUDA,      // torch.version.cuda
      std::string("torch_hip=") + MA_BUILD_TORCH_HIP,        // torch.version.hip
      std::string("compiler=") + MA_BUILD_COMPILER_VERSION,  // nvcc / HIP clang version
      std::string("extend_sm90=") + MA_BUILD_EXTEND_SM90,    // sm_90a warp-specialised kernel built
      // The GPU kernels' variants (MIXED_ATTN_HEAD_DIMS / MIXED_ATTN_FP8; the CPU path has all).
      std::string("gpu_head_dims=") + MA_BUILD_GPU_HEAD_DIMS,  // comma-separated
      std::string("gpu_fp8=") + MA_BUILD_GPU_FP8,              // 1: float8_e4m3fn cache kernels built
  };
}

}  // namespace
}  // namespace mixed_attn

TORCH_LIBRARY_IMPL(mixed_attn, CompositeExplicitAutograd, m) { m.impl("build_info", &mixed_attn::build_info_op); }
