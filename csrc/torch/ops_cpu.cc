// CPU implementations of torch.ops.mixed_attn.{plan, forward, extend_tile_tokens}.
#include <torch/library.h>

#include <cstring>

#include "cpu/attention_cpu.h"
#include "mixed_attn/plan.h"
#include "op_args.h"

#ifdef MIXED_ATTN_WITH_CUDA
#include "cuda/launch.h"
#endif

namespace mixed_attn {
namespace {

std::vector<int64_t> plan_op(const at::Tensor& qo_indptr, const at::Tensor& kv_indptr, const at::Tensor& seq_lens,
                             const at::Tensor& meta_out, c10::IntArrayRef config) {
  return plan_host(qo_indptr, kv_indptr, seq_lens, meta_out, config);
}

// CPU "upload": the device buffer is host memory too.
std::vector<int64_t> plan_upload_cpu(const at::Tensor& qo_indptr, const at::Tensor& kv_indptr,
                                     const at::Tensor& seq_lens, const at::Tensor& meta_host,
                                     const at::Tensor& meta_device, const at::Tensor& config) {
  check_upload_target(meta_host, meta_device);
  std::vector<int64_t> info = plan_host(qo_indptr, kv_indptr, seq_lens, meta_host, config_list(config));
  std::memcpy(meta_device.data_ptr<int32_t>(), meta_host.data_ptr<int32_t>(), sizeof(int32_t) * info[kPlanMetaLen]);
  return info;
}

// [extend_kernel, extend_block_rows, extend_pack, extend_tile_tokens, extend_tma, decode_kernel,
//  graph_max_tiles, graph_max_partials, decode_max_q, extend_persistent, extend_max_item_parts,
//  extend_min_tile_tokens] (graph_* 0 unless the config is graph-safe; the last: the fewest query
//  tokens a tile of a plan of this policy may hold, which sizes the metadata buffer; below
//  extend_tile_tokens where a step may take the kernel's other shape)
std::vector<int64_t> launch_policy_op(c10::IntArrayRef config) {
  const PlanConfig cfg = plan_config(config, 0);
  LaunchPolicy p;
  std::string err = config_launch_policy(cfg, &p);
  TORCH_CHECK(err.empty(), "mixed_attn: ", err);
  GraphBounds g;
  if (cfg.graph_safe) {
    err = graph_bounds(cfg, p, &g);
    TORCH_CHECK(err.empty(), "mixed_attn: ", err);
  }
  return {
      int64_t(p.extend_kernel),
      p.extend_block_rows,
      p.extend_pack,
      p.extend_tile_tokens,
      p.extend_tma ? 1 : 0,
      int64_t(p.decode_kernel),
      g.max_tiles,
      g.max_partials,
      p.decode_max_q,
      p.extend_persistent ? 1 : 0,
      p.extend_max_item_parts,
      p.extend_alt_block_rows > 0 ? std::min(p.extend_tile_tokens, p.extend_alt_tile_tokens) : p.extend_tile_tokens};
}

std::vector<std::string> plan_field_names_op(c10::string_view which) {
  const char* const* names = nullptr;
  if (which == "config") names = plan_config_field_names();
  else if (which == "info") names = plan_info_field_names();
  TORCH_CHECK(names != nullptr, "mixed_attn.plan_field_names: which must be 'config' or 'info', got '",
              std::string(which), "'");
  std::vector<std::string> out;
  for (; *names != nullptr; ++names) out.emplace_back(*names);
  return out;
}

// [kind, arch, num_sms, sm90_extend, tma_encoder, hip_mfma] of DeviceDesc.
std::vector<int64_t> device_desc_op(c10::Device device) {
  DeviceDesc d;
#ifdef MIXED_ATTN_WITH_CUDA
  if (device.is_cuda()) {
    const char* err = gpu::query_device(device.has_index() ? device.index() : -1, &d);
    TORCH_CHECK(err == nullptr, "mixed_attn.device_desc: ", err);
    return {int64_t(d.kind), d.arch, d.num_sms, d.sm90_extend ? 1 : 0, d.tma_encoder ? 1 : 0, d.hip_mfma ? 1 : 0};
  }
#endif
  TORCH_CHECK(device.is_cpu(), "mixed_attn: this build has no kernels for ", device,
              " (built without its GPU backend)");
  return {int64_t(d.kind), d.arch, d.num_sms, 0, 0, 0};
}

// Page ids are host-readable here, so the CPU path always checks them.
void check_page_ids(const ForwardLaunch& L, int64_t num_pages) {
  const PlanView& pl = L.extend.attn.plan;
  const int32_t* ids = L.extend.attn.kv_indices;
  const int64_t page = L.extend.attn.page_size;
  for (int32_t b = 0; b < pl.num_rows; ++b) {
    const int64_t n = (pl.seq_lens[b] + page - 1) / page;
    for (int64_t i = 0; i < n; ++i) {
      const int32_t id = ids[pl.kv_indptr[b] + i];
      TORCH_CHECK(id >= 0 && id < num_pages, "mixed_attn.forward: kv_indices[", pl.kv_indptr[b] + i, "] = ", id,
                  " (row ", b, ") is not a page of the cache (", num_pages, " pages)");
    }
  }
}

void forward_cpu(const at::Tensor& q, const std::optional<at::Tensor>& k, const std::optional<at::Tensor>& v,
                 const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor& kv_indices,
                 const at::Tensor& plan_meta, c10::IntArrayRef plan_info, const std::optional<at::Tensor>& partial_out,
                 const std::optional<at::Tensor>& partial_lse, const at::Tensor& out,
                 const std::optional<at::Tensor>& lse, const std::optional<at::Tensor>& sinks, double sm_scale,
                 double logit_cap, int64_t window_left, double k_scale, double v_scale) {
  ForwardArgs a{q,           k,   v,   k_cache, v_cache,  kv_indices, plan_meta,   plan_info, partial_out,
                partial_lse, out, lse, sinks,   sm_scale, logit_cap,  window_left, k_scale,   v_scale};
  ForwardLaunch L = prepare_forward(a, /*allow_fp32_q=*/true);
  check_page_ids(L, k_cache.size(0));
  // Everything is validated: from here on the call writes.
  if (L.save_kv) cpu::save_kv(L.save);
  cpu::extend(L.extend);
  cpu::decode(L.decode);
}

int64_t plan_meta_capacity_op(int64_t max_rows, int64_t max_tokens, int64_t extend_tile_tokens, int64_t head_groups) {
  return plan_meta_capacity(max_rows, max_tokens, extend_tile_tokens, head_groups);
}

}  // namespace
}  // namespace mixed_attn

TORCH_LIBRARY_IMPL(mixed_attn, CPU, m) {
  m.impl("plan", &mixed_attn::plan_op);
  m.impl("plan_upload", &mixed_attn::plan_upload_cpu);
  m.impl("forward", &mixed_attn::forward_cpu);
}

TORCH_LIBRARY_IMPL(mixed_attn, CompositeExplicitAutograd, m) {
  m.impl("launch_policy", &mixed_attn::launch_policy_op);
  m.impl("plan_field_names", &mixed_attn::plan_field_names_op);
  m.impl("device_desc", &mixed_attn::device_desc_op);
  m.impl("plan_meta_capacity", &mixed_attn::plan_meta_capacity_op);
}
