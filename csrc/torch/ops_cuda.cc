// CUDA implementation of torch.ops.mixed_attn.forward: checks, then the three
// launches on the current stream (save, extend, decode). No allocation, no sync.
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "cuda/launch.h"
#include "op_args.h"

namespace mixed_attn {
namespace {

void check_launch(const char* what, const char* err) {
  TORCH_CHECK(err == nullptr, "mixed_attn.forward: ", what, " failed: ", err);
}

void forward_cuda(const at::Tensor& q, const std::optional<at::Tensor>& k,
                  const std::optional<at::Tensor>& v, const at::Tensor& k_cache,
                  const at::Tensor& v_cache, const at::Tensor& kv_indices,
                  const at::Tensor& plan_meta, c10::IntArrayRef plan_info,
                  const std::optional<at::Tensor>& partial_out,
                  const std::optional<at::Tensor>& partial_lse, const at::Tensor& out,
                  const std::optional<at::Tensor>& lse, const std::optional<at::Tensor>& sinks,
                  double sm_scale, double logit_cap, int64_t window_left, double k_scale,
                  double v_scale) {
  ForwardArgs a{q, k, v, k_cache, v_cache, kv_indices, plan_meta, plan_info, partial_out,
                partial_lse, out, lse, sinks, sm_scale, logit_cap, window_left, k_scale, v_scale};
  const c10::cuda::CUDAGuard guard(q.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(q.device().index()).stream();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_launch("cudaStreamIsCapturing", cudaStreamIsCapturing(stream, &capture) == cudaSuccess
                                            ? nullptr : "could not query the stream's capture state");
  ForwardLaunch L = prepare_forward(a, /*allow_fp32_q=*/false, capture == cudaStreamCaptureStatusActive);
  if (L.save_kv) check_launch("KV save", gpu::launch_save_kv(L.save, stream));
  check_launch("extend kernel", gpu::launch_extend(L.extend, stream));
  check_launch("decode kernel", gpu::launch_decode(L.decode, stream));
}

}  // namespace
}  // namespace mixed_attn

TORCH_LIBRARY_IMPL(mixed_attn, CUDA, m) { m.impl("forward", &mixed_attn::forward_cuda); }
