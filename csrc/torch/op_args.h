// Torch-side argument checking and params filling, shared by the CPU and CUDA
// implementations of torch.ops.mixed_attn.forward. Every check runs before
// anything is written; each error names the argument.
#pragma once
#include <torch/types.h>

#include <optional>
#include <vector>

#include "mixed_attn/params.h"
#include "mixed_attn/plan.h"

namespace mixed_attn {

struct ForwardArgs {
  const at::Tensor& q;
  const std::optional<at::Tensor>& k;
  const std::optional<at::Tensor>& v;
  const at::Tensor& k_cache;
  const at::Tensor& v_cache;
  const at::Tensor& kv_indices;
  const at::Tensor& plan_meta;
  c10::ArrayRef<int64_t> plan_info;
  const std::optional<at::Tensor>& partial_out;
  const std::optional<at::Tensor>& partial_lse;
  const at::Tensor& out;
  const std::optional<at::Tensor>& lse;
  const std::optional<at::Tensor>& sinks;
  double sm_scale;
  double logit_cap;
  int64_t window_left;
  double k_scale;
  double v_scale;
};

// Everything a backend needs to run one forward call.
struct ForwardLaunch {
  bool save_kv = false;
  SaveKVParams save{};
  ExtendParams extend{};
  DecodeParams decode{};
};

// Checks every argument against the plan and each other (throws c10::Error
// naming the argument) and fills the params. `capturing`: the call is being
// captured into a CUDA graph (only graph-safe plans may be; tensors must then
// hold the whole bucket).
ForwardLaunch prepare_forward(const ForwardArgs& a, bool allow_fp32_q, bool capturing = false);

DType to_dtype(at::ScalarType t);

// A PlanConfig from its list form (throws naming the field).
PlanConfig plan_config(c10::IntArrayRef config, int64_t meta_capacity);

// torch.ops.mixed_attn.plan: checks the host tensors, plans into meta_out, returns plan_info.
std::vector<int64_t> plan_host(const at::Tensor& qo_indptr, const at::Tensor& kv_indptr, const at::Tensor& seq_lens,
                               const at::Tensor& meta_out, c10::IntArrayRef config);

// A config passed as a host int64 tensor, viewed as the list.
c10::IntArrayRef config_list(const at::Tensor& config);

// plan_upload's target buffer: contiguous int32, at least as large as the host one.
void check_upload_target(const at::Tensor& meta_host, const at::Tensor& meta_device);

}  // namespace mixed_attn
