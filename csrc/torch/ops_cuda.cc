// CUDA implementation of torch.ops.mixed_attn.forward: checks, then the three
// launches on the current stream (save, extend, decode). No allocation, no sync.
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <mutex>
#include <unordered_map>

#include "cuda/launch.h"
#include "op_args.h"

namespace mixed_attn {
namespace {

void check_launch(const char* what, const char* err) {
  TORCH_CHECK(err == nullptr, "mixed_attn.forward: ", what, " failed: ", err);
}

void forward_cuda(const at::Tensor& q, const std::optional<at::Tensor>& k, const std::optional<at::Tensor>& v,
                  const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor& kv_indices,
                  const at::Tensor& plan_meta, c10::IntArrayRef plan_info, const std::optional<at::Tensor>& partial_out,
                  const std::optional<at::Tensor>& partial_lse, const at::Tensor& out,
                  const std::optional<at::Tensor>& lse, const std::optional<at::Tensor>& sinks, double sm_scale,
                  double logit_cap, int64_t window_left, double k_scale, double v_scale) {
  ForwardArgs a{q,           k,   v,   k_cache, v_cache,  kv_indices, plan_meta,   plan_info, partial_out,
                partial_lse, out, lse, sinks,   sm_scale, logit_cap,  window_left, k_scale,   v_scale};
  const c10::cuda::CUDAGuard guard(q.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(q.device().index()).stream();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_launch("cudaStreamIsCapturing", cudaStreamIsCapturing(stream, &capture) == cudaSuccess
                                            ? nullptr
                                            : "could not query the stream's capture state");
  ForwardLaunch L = prepare_forward(a, /*allow_fp32_q=*/false, capture == cudaStreamCaptureStatusActive);
  // Variants a subset build left out (CMake options): refused before any launch writes.
  TORCH_CHECK(gpu::build_has_head_dim(L.extend.attn.head_dim),
              "mixed_attn.forward: this build has no "
              "kernels for head_dim ",
              L.extend.attn.head_dim, " (built with a MIXED_ATTN_HEAD_DIMS subset)");
  TORCH_CHECK(L.extend.attn.kv_dtype != DType::kFloat8E4M3 || gpu::build_has_fp8(),
              "mixed_attn.forward: "
              "this build has no kernels for float8_e4m3fn caches (built with MIXED_ATTN_FP8=OFF)");
  if (L.save_kv) check_launch("KV save", gpu::launch_save_kv(L.save, stream));
  if (L.decode.attn.plan.decode_first != 0) {
    // The plan's order for a small extend beside a large decode (launch_policy.h, decode_first):
    // stage 1 as an ordinary launch after the KV save, the extend as its programmatic dependent.
    check_launch("decode kernel", gpu::launch_decode(L.decode, stream));
    L.extend.follows_decode = 1;
    check_launch("extend kernel", gpu::launch_extend(L.extend, stream));
    return;
  }
  check_launch("extend kernel", gpu::launch_extend(L.extend, stream));
  // Whether the extend launched a grid just now: only then may the decode's stage 1 be its
  // programmatic dependent (after a KV save it must wait for the cache; cuda/common/pdl.cuh).
  L.decode.follows_extend = gpu::extend_launches(L.extend) ? 1 : 0;
  check_launch("decode kernel", gpu::launch_decode(L.decode, stream));
}

// The event of the last copy out of each pinned host buffer: a plan must not overwrite host
// memory that a queued copy still reads. Keyed by the buffer's address; a buffer freed and
// another allocated at the same address only waits on an event that is long complete.
cudaEvent_t upload_event(const void* host, bool* fresh) {
  static std::mutex mutex;
  static std::unordered_map<const void*, cudaEvent_t> events;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = events.find(host);
  *fresh = it == events.end();
  if (!*fresh) return it->second;
  cudaEvent_t ev = nullptr;
  TORCH_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess,
              "mixed_attn.plan_upload: could not create an event");
  events.emplace(host, ev);
  return ev;
}

// plan_upload on CUDA: waits for the previous copy out of this host buffer (only when the GPU
// is that far behind), plans into it, then the step's one host-to-device copy, async on the
// current stream, and records the buffer's event. All in C++: the Python-side slicing, copy and
// event calls cost more than the planning itself.
std::vector<int64_t> plan_upload_cuda(const at::Tensor& qo_indptr, const at::Tensor& kv_indptr,
                                      const at::Tensor& seq_lens, const at::Tensor& meta_host,
                                      const at::Tensor& meta_device, const at::Tensor& config) {
  check_upload_target(meta_host, meta_device);
  TORCH_CHECK(meta_device.is_cuda(), "mixed_attn.plan_upload: meta_device must be a CUDA tensor");
  TORCH_CHECK(meta_host.is_pinned(),
              "mixed_attn.plan_upload: meta_host must be pinned host memory "
              "(an async copy from pageable memory would synchronise)");
  const c10::cuda::CUDAGuard guard(meta_device.device());
  bool fresh = false;
  cudaEvent_t ev = upload_event(meta_host.data_ptr(), &fresh);
  if (!fresh)
    TORCH_CHECK(cudaEventSynchronize(ev) == cudaSuccess,
                "mixed_attn.plan_upload: waiting for the previous copy failed");
  std::vector<int64_t> info = plan_host(qo_indptr, kv_indptr, seq_lens, meta_host, config_list(config));
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(meta_device.device().index()).stream();
  cudaError_t e = cudaMemcpyAsync(meta_device.data_ptr<int32_t>(), meta_host.data_ptr<int32_t>(),
                                  sizeof(int32_t) * info[kPlanMetaLen], cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) e = cudaEventRecord(ev, stream);
  TORCH_CHECK(e == cudaSuccess, "mixed_attn.plan_upload: the metadata copy failed: ", cudaGetErrorString(e));
  return info;
}

}  // namespace
}  // namespace mixed_attn

TORCH_LIBRARY_IMPL(mixed_attn, CUDA, m) {
  m.impl("forward", &mixed_attn::forward_cuda);
  m.impl("plan_upload", &mixed_attn::plan_upload_cuda);
}
