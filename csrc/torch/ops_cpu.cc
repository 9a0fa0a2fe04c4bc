// CPU implementations of torch.ops.mixed_attn.{plan, forward, extend_tile_tokens}.
#include <torch/library.h>

#include "cpu/attention_cpu.h"
#include "mixed_attn/plan.h"
#include "op_args.h"

#ifdef MIXED_ATTN_WITH_CUDA
#include "cuda/launch.h"
#endif

namespace mixed_attn {
namespace {

void check_host_int32(const at::Tensor& t, const char* name, int64_t numel) {
  TORCH_CHECK(t.device().is_cpu(), "mixed_attn.plan: ", name,
              " must be a host (CPU) tensor: planning never reads device memory, got ", t.device());
  TORCH_CHECK(t.scalar_type() == at::kInt, "mixed_attn.plan: ", name, " must be int32, got ",
              t.scalar_type());
  TORCH_CHECK(t.dim() == 1 && t.is_contiguous(), "mixed_attn.plan: ", name,
              " must be a contiguous 1-D tensor");
  if (numel >= 0)
    TORCH_CHECK(t.numel() == numel, "mixed_attn.plan: ", name, " must have ", numel,
                " entries, got ", t.numel());
}

std::vector<int64_t> plan_op(const at::Tensor& qo_indptr, const at::Tensor& kv_indptr,
                             const at::Tensor& seq_lens, const at::Tensor& meta_out,
                             int64_t page_size, int64_t num_qo_heads, int64_t num_kv_heads,
                             int64_t head_dim, int64_t window_left, int64_t mode, int64_t num_sms,
                             bool deterministic, int64_t fixed_split_tokens,
                             int64_t max_splits_per_row, int64_t extend_tile_tokens,
                             int64_t min_split_tokens, int64_t ctas_per_sm) {
  check_host_int32(qo_indptr, "qo_indptr", -1);
  TORCH_CHECK(qo_indptr.numel() >= 2, "mixed_attn.plan: qo_indptr needs at least 2 entries (one row), got ",
              qo_indptr.numel());
  const int64_t B = qo_indptr.numel() - 1;
  check_host_int32(kv_indptr, "kv_indptr", B + 1);
  check_host_int32(seq_lens, "seq_lens", B);
  check_host_int32(meta_out, "meta_out", -1);
  TORCH_CHECK(mode == 0 || mode == 1, "mixed_attn.plan: mode must be 0 (split) or 1 (fold), got ", mode);
  TORCH_CHECK(window_left >= -1, "mixed_attn.plan: window_left must be >= -1, got ", window_left);

  PlanConfig cfg;
  cfg.page_size = int32_t(page_size);
  cfg.num_qo_heads = int32_t(num_qo_heads);
  cfg.num_kv_heads = int32_t(num_kv_heads);
  cfg.head_dim = int32_t(head_dim);
  cfg.window_left = int32_t(window_left);
  cfg.mode = DispatchMode(mode);
  cfg.num_sms = int32_t(num_sms);
  cfg.deterministic = deterministic;
  cfg.fixed_split_tokens = int32_t(fixed_split_tokens);
  cfg.max_splits_per_row = int32_t(max_splits_per_row);
  cfg.extend_tile_tokens = int32_t(extend_tile_tokens);
  cfg.min_split_tokens = int32_t(min_split_tokens);
  cfg.ctas_per_sm = int32_t(ctas_per_sm);
  cfg.meta_capacity = meta_out.numel();
  PlanInputs in{qo_indptr.data_ptr<int32_t>(), kv_indptr.data_ptr<int32_t>(),
                seq_lens.data_ptr<int32_t>(), int32_t(B)};
  PlanResult r = plan_step(cfg, in, meta_out.data_ptr<int32_t>());
  TORCH_CHECK(r.ok, "mixed_attn.plan: ", r.error);
  return r.info;
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
      TORCH_CHECK(id >= 0 && id < num_pages, "mixed_attn.forward: kv_indices[",
                  pl.kv_indptr[b] + i, "] = ", id, " (row ", b, ") is not a page of the cache (",
                  num_pages, " pages)");
    }
  }
}

void forward_cpu(const at::Tensor& q, const std::optional<at::Tensor>& k,
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
  ForwardLaunch L = prepare_forward(a, /*allow_fp32_q=*/true);
  check_page_ids(L, k_cache.size(0));
  // Everything is validated: from here on the call writes.
  if (L.save_kv) cpu::save_kv(L.save);
  cpu::extend(L.extend);
  cpu::decode(L.decode);
}

int64_t extend_tile_tokens_op(c10::Device device, int64_t head_dim, int64_t group_size) {
#ifdef MIXED_ATTN_WITH_CUDA
  if (device.is_cuda()) return gpu::extend_tile_tokens(int(head_dim), int(group_size));
#endif
  TORCH_CHECK(device.is_cpu(), "mixed_attn: this build has no kernels for ", device,
              " (built without its GPU backend)");
  return 16;
}

int64_t plan_meta_capacity_op(int64_t max_rows, int64_t max_tokens, int64_t extend_tile_tokens) {
  return plan_meta_capacity(max_rows, max_tokens, extend_tile_tokens);
}

}  // namespace
}  // namespace mixed_attn

TORCH_LIBRARY_IMPL(mixed_attn, CPU, m) {
  m.impl("plan", &mixed_attn::plan_op);
  m.impl("forward", &mixed_attn::forward_cpu);
}

TORCH_LIBRARY_IMPL(mixed_attn, CompositeExplicitAutograd, m) {
  m.impl("extend_tile_tokens", &mixed_attn::extend_tile_tokens_op);
  m.impl("plan_meta_capacity", &mixed_attn::plan_meta_capacity_op);
}
