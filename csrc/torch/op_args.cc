#include "op_args.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace mixed_attn {

DType to_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::kFloat32;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kFloat8_e4m3fn: return DType::kFloat8E4M3;
    default: TORCH_CHECK(false, "mixed_attn: unsupported dtype ", t);
  }
}

namespace {

void check_device(const at::Tensor& t, const char* name, const at::Device& dev) {
  TORCH_CHECK(t.device() == dev, "mixed_attn.forward: ", name, " must be on ", dev, " (where q is), got ", t.device());
}

void check_shape(const at::Tensor& t, const char* name, std::vector<int64_t> want) {
  TORCH_CHECK(t.sizes() == c10::IntArrayRef(want), "mixed_attn.forward: ", name, " must have shape ",
              c10::IntArrayRef(want), ", got ", t.sizes());
}

void check_last_dim_contiguous(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.stride(-1) == 1, "mixed_attn.forward: ", name,
              " must be contiguous in its last dimension, got strides ", t.strides());
}

// The GPU kernels copy q, k, v and the caches' rows in 16-byte pieces, and the sm_90a kernel reads
// q and the caches by TMA, whose tensor maps take an address and strides of multiples of 16 bytes:
// a tensor that breaks this is refused here, before anything is written, on every device (one
// contract; the launchers' own checks come after the KV save and the extend have run). Every
// stride but the last dimension's (contiguous) counts.
void check_16_byte_aligned(const at::Tensor& t, const char* name) {
  const int64_t es = int64_t(t.element_size());
  bool ok = reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) ok = ok && t.stride(d) * es % 16 == 0;
  TORCH_CHECK(ok, "mixed_attn.forward: ", name, "'s address and its strides (all but the last dimension's) must be ",
              "multiples of 16 bytes, got strides ", t.strides(), " (elements of ", es, " bytes)");
}

void check_finite_positive(double x, const char* name) {
  TORCH_CHECK(std::isfinite(x) && x > 0, "mixed_attn.forward: ", name, " must be finite and > 0, got ", x);
}

}  // namespace

ForwardLaunch prepare_forward(const ForwardArgs& a, bool allow_fp32_q, bool capturing) {
  const char* F = "mixed_attn.forward: ";
  // The plan first: every shape below is checked against it.
  std::string perr = check_plan_info(a.plan_info.data(), int64_t(a.plan_info.size()));
  TORCH_CHECK(perr.empty(), F, perr);
  const int64_t* info = a.plan_info.data();
  const int64_t T = info[kPlanNumTokens], Hq = info[kPlanNumQoHeads], Hkv = info[kPlanNumKvHeads];
  const int64_t D = info[kPlanHeadDim], page = info[kPlanPageSize];
  const bool split = info[kPlanMode] == int64_t(DispatchMode::kSplit);
  const int64_t num_partials = info[kPlanNumPartials];
  const bool graph = info[kPlanGraphSafe] != 0;
  // Normal plans bake the step's counts into the launch: a captured run replayed after
  // another plan() would compute the old step. Refuse to capture them.
  TORCH_CHECK(!capturing || graph, F,
              "this plan is not graph-safe: capturing it in a CUDA graph would replay the "
              "captured step's geometry after any re-plan. Build the wrapper with "
              "MixedAttention(..., cuda_graph=True) to capture run()");
  // Token rows the tensors must hold: the step's, or for a capture every step's of the bucket
  // (a replay reads and writes up to the plan it runs with).
  const int64_t rows_needed = capturing ? info[kPlanGraphMaxTokens] : T;
  const int64_t slots_needed = capturing ? info[kPlanGraphMaxPartials] : num_partials;
  // [tokens, rest...]: exactly the plan's T tokens, or for graph-safe plans at least as many
  // as a replay may touch.
  auto check_token_shape = [&](const at::Tensor& t, const char* name, std::vector<int64_t> rest) {
    if (!graph) {
      rest.insert(rest.begin(), T);
      check_shape(t, name, rest);
      return;
    }
    bool ok = t.dim() == int64_t(rest.size()) + 1;
    for (size_t i = 0; ok && i < rest.size(); ++i) ok = t.size(int64_t(i) + 1) == rest[i];
    TORCH_CHECK(ok, F, name, " must be [tokens, ", c10::IntArrayRef(rest), "], got ", t.sizes());
    TORCH_CHECK(t.size(0) >= rows_needed, F, name, " has ", t.size(0), " tokens but ",
                capturing ? "the graph bucket's max_tokens is " : "the plan has ", rows_needed);
  };

  const at::Device dev = a.q.device();
  // q
  TORCH_CHECK(a.q.dim() == 3, F, "q must be [T, Hq, D], got ", a.q.dim(), " dims");
  const auto qt = a.q.scalar_type();
  TORCH_CHECK(qt == at::kBFloat16 || qt == at::kHalf || (allow_fp32_q && qt == at::kFloat), F,
              "q must be bfloat16 or float16", allow_fp32_q ? " (or float32 on the CPU)" : "", ", got ", qt);
  TORCH_CHECK(a.q.size(1) == Hq && a.q.size(2) == D, F, "q must be [T, ", Hq, ", ", D,
              "] (heads and head_dim of the plan), got ", a.q.sizes());
  if (graph) {
    check_token_shape(a.q, "q", {Hq, D});
  } else {
    TORCH_CHECK(a.q.size(0) == T, F, "q has ", a.q.size(0), " tokens but the plan has ", T, " (qo_indptr[-1])");
  }
  check_last_dim_contiguous(a.q, "q");
  check_16_byte_aligned(a.q, "q");
  // plan_meta
  check_device(a.plan_meta, "plan_meta", dev);
  TORCH_CHECK(a.plan_meta.scalar_type() == at::kInt && a.plan_meta.dim() == 1 && a.plan_meta.is_contiguous(), F,
              "plan_meta must be a contiguous 1-D int32 tensor");
  TORCH_CHECK(a.plan_meta.numel() >= info[kPlanMetaLen], F, "plan_meta holds ", a.plan_meta.numel(),
              " entries, the plan needs ", info[kPlanMetaLen]);
  // k, v (new tokens)
  TORCH_CHECK(a.k.has_value() == a.v.has_value(), F,
              "k and v must be given together (both to save the new tokens, neither to skip the save)");
  const bool save = a.k.has_value();
  if (save) {
    for (auto [t, name] : {std::pair{&*a.k, "k"}, std::pair{&*a.v, "v"}}) {
      check_device(*t, name, dev);
      TORCH_CHECK(t->scalar_type() == qt, F, name, " must have q's dtype ", qt, ", got ", t->scalar_type());
      check_token_shape(*t, name, {Hkv, D});
      check_last_dim_contiguous(*t, name);
      check_16_byte_aligned(*t, name);
    }
  }
  // caches
  const auto kvt = a.k_cache.scalar_type();
  TORCH_CHECK(kvt == qt || kvt == at::kFloat8_e4m3fn, F, "k_cache must have q's dtype (", qt,
              ") or float8_e4m3fn, got ", kvt);
  TORCH_CHECK(a.v_cache.scalar_type() == kvt, F, "v_cache must have k_cache's dtype ", kvt, ", got ",
              a.v_cache.scalar_type());
  // The plan chose its kernels for one cache dtype (the sm_90a extend kernel takes b16 only).
  TORCH_CHECK(
      info[kPlanExtendKernel] == int64_t(ExtendKernel::kHost) || (kvt == at::kFloat8_e4m3fn) == (info[kPlanKvFp8] != 0),
      F, "k_cache is ", kvt, " but the plan was made for a ", info[kPlanKvFp8] ? "float8_e4m3fn" : "bf16/fp16",
      " cache: build the wrapper with kv_dtype=k_cache.dtype");
  for (auto [t, name] : {std::pair{&a.k_cache, "k_cache"}, std::pair{&a.v_cache, "v_cache"}}) {
    check_device(*t, name, dev);
    TORCH_CHECK(t->dim() == 4, F, name, " must be [num_pages, page_size, Hkv, D], got ", t->dim(), " dims");
    TORCH_CHECK(t->size(1) == page && t->size(2) == Hkv && t->size(3) == D, F, name, " must be [num_pages, ", page,
                ", ", Hkv, ", ", D, "] (page_size, Hkv, D of the plan), got ", t->sizes());
    check_last_dim_contiguous(*t, name);
    check_16_byte_aligned(*t, name);
  }
  TORCH_CHECK(a.v_cache.size(0) == a.k_cache.size(0), F, "v_cache has ", a.v_cache.size(0), " pages but k_cache has ",
              a.k_cache.size(0));
  // page table
  check_device(a.kv_indices, "kv_indices", dev);
  TORCH_CHECK(a.kv_indices.scalar_type() == at::kInt && a.kv_indices.dim() == 1 && a.kv_indices.is_contiguous(), F,
              "kv_indices must be a contiguous 1-D int32 tensor, got ", a.kv_indices.scalar_type(), " with ",
              a.kv_indices.dim(), " dims");
  TORCH_CHECK(a.kv_indices.numel() >= info[kPlanNumKvPages], F, "kv_indices holds ", a.kv_indices.numel(),
              " page ids but kv_indptr[-1] is ", info[kPlanNumKvPages]);
  // arena
  if (split && (graph ? info[kPlanGraphMaxPartials] > 1 : num_partials > 0)) {
    TORCH_CHECK(a.partial_out.has_value() && a.partial_lse.has_value(), F, "the plan has ",
                graph ? info[kPlanGraphMaxPartials] : num_partials,
                " decode splits but no arena (partial_out / partial_lse) was given");
  }
  const bool cut = info[kPlanExtendCutItems] > 0;
  TORCH_CHECK(!cut || a.partial_out.has_value(), F, "the plan cuts ", info[kPlanExtendCutItems],
              " extend items into parts, whose partials go to the arena, but no arena (partial_out / "
              "partial_lse) was given");
  if (a.partial_out.has_value() || a.partial_lse.has_value()) {
    TORCH_CHECK(a.partial_out.has_value() && a.partial_lse.has_value(), F,
                "partial_out and partial_lse must be given together");
    const auto& po = *a.partial_out;
    const auto& pl = *a.partial_lse;
    check_device(po, "partial_out", dev);
    check_device(pl, "partial_lse", dev);
    TORCH_CHECK(po.scalar_type() == at::kFloat && pl.scalar_type() == at::kFloat, F,
                "partial_out and partial_lse must be float32");
    TORCH_CHECK(po.is_contiguous() && pl.is_contiguous(), F, "partial_out and partial_lse must be contiguous");
    TORCH_CHECK(po.dim() == 3 && po.size(1) == Hq && po.size(2) == D, F, "partial_out must be [slots, ", Hq, ", ", D,
                "], got ", po.sizes());
    TORCH_CHECK(pl.dim() == 2 && pl.size(1) == Hq && pl.size(0) == po.size(0), F, "partial_lse must be [", po.size(0),
                ", ", Hq, "], got ", pl.sizes());
    TORCH_CHECK(po.size(0) >= slots_needed, F, "arena too small: the plan needs ", slots_needed,
                " partial slots, partial_out holds ", po.size(0),
                " (plan through MixedAttention.plan, which grows the arena)");
  }
  // outputs
  check_device(a.out, "out", dev);
  TORCH_CHECK(a.out.scalar_type() == qt, F, "out must have q's dtype ", qt, ", got ", a.out.scalar_type());
  check_token_shape(a.out, "out", {Hq, D});
  check_last_dim_contiguous(a.out, "out");
  if (a.lse.has_value()) {
    check_device(*a.lse, "lse", dev);
    TORCH_CHECK(a.lse->scalar_type() == at::kFloat, F, "lse must be float32, got ", a.lse->scalar_type());
    check_token_shape(*a.lse, "lse", {Hq});
    check_last_dim_contiguous(*a.lse, "lse");
  }
  if (a.sinks.has_value()) {
    check_device(*a.sinks, "sinks", dev);
    TORCH_CHECK(a.sinks->scalar_type() == at::kFloat, F, "sinks must be float32, got ", a.sinks->scalar_type());
    check_shape(*a.sinks, "sinks", {Hq});
    TORCH_CHECK(a.sinks->is_contiguous(), F, "sinks must be contiguous");
  }
  // scalars
  check_finite_positive(a.sm_scale, "sm_scale");
  TORCH_CHECK(std::isfinite(a.logit_cap) && a.logit_cap >= 0, F, "logit_cap must be finite and >= 0 (0 = off), got ",
              a.logit_cap);
  TORCH_CHECK(a.window_left == info[kPlanWindowLeft], F, "window_left (", a.window_left, ") differs from the plan's (",
              info[kPlanWindowLeft], "): re-plan with the same window");
  check_finite_positive(a.k_scale, "k_scale");
  check_finite_positive(a.v_scale, "v_scale");

  // Fill the params.
  ForwardLaunch L;
  AttentionCommon c{};
  c.q = a.q.data_ptr();
  c.q_stride_token = a.q.stride(0);
  c.q_stride_head = a.q.stride(1);
  c.q_tokens = a.q.size(0);
  c.k_cache = a.k_cache.data_ptr();
  c.v_cache = a.v_cache.data_ptr();
  c.k_stride_page = a.k_cache.stride(0);
  c.k_stride_slot = a.k_cache.stride(1);
  c.k_stride_head = a.k_cache.stride(2);
  c.v_stride_page = a.v_cache.stride(0);
  c.v_stride_slot = a.v_cache.stride(1);
  c.v_stride_head = a.v_cache.stride(2);
  c.num_pages = std::min(a.k_cache.size(0), a.v_cache.size(0));
  c.kv_indices = a.kv_indices.data_ptr<int32_t>();
  c.out = a.out.data_ptr();
  c.out_stride_token = a.out.stride(0);
  c.out_stride_head = a.out.stride(1);
  c.maybe_lse = a.lse.has_value() ? a.lse->data_ptr<float>() : nullptr;
  c.lse_stride_token = a.lse.has_value() ? a.lse->stride(0) : 0;
  c.maybe_sinks = a.sinks.has_value() ? a.sinks->data_ptr<float>() : nullptr;
  c.num_qo_heads = int32_t(Hq);
  c.num_kv_heads = int32_t(Hkv);
  c.head_dim = int32_t(D);
  c.page_size = int32_t(page);
  c.sm_scale = float(a.sm_scale);
  c.logit_cap = float(a.logit_cap);
  c.window_left = int32_t(a.window_left);
  const bool fp8 = kvt == at::kFloat8_e4m3fn;
  c.k_scale = fp8 ? float(a.k_scale) : 1.f;
  c.v_scale = fp8 ? float(a.v_scale) : 1.f;
  c.q_dtype = to_dtype(qt);
  c.kv_dtype = to_dtype(kvt);
  c.plan = plan_view(info, a.plan_meta.data_ptr<int32_t>());

  L.extend.attn = c;
  L.decode.attn = c;
  if (a.partial_out.has_value()) {
    L.decode.partial_out = a.partial_out->data_ptr<float>();
    L.decode.partial_lse = a.partial_lse->data_ptr<float>();
  }
  if (cut) {
    L.extend.maybe_cut_partials = L.decode.partial_out + info[kPlanExtendCutSlot0] * Hq * D;
    L.extend.maybe_cut_counters = a.plan_meta.data_ptr<int32_t>() + info[kPlanOffExtendCutCounters];
  }
  L.save_kv = save;
  if (save) {
    SaveKVParams& s = L.save;
    s.k = a.k->data_ptr();
    s.v = a.v->data_ptr();
    s.k_stride_token = a.k->stride(0);
    s.k_stride_head = a.k->stride(1);
    s.v_stride_token = a.v->stride(0);
    s.v_stride_head = a.v->stride(1);
    s.k_cache = a.k_cache.data_ptr();
    s.v_cache = a.v_cache.data_ptr();
    s.kc_stride_page = a.k_cache.stride(0);
    s.kc_stride_slot = a.k_cache.stride(1);
    s.kc_stride_head = a.k_cache.stride(2);
    s.vc_stride_page = a.v_cache.stride(0);
    s.vc_stride_slot = a.v_cache.stride(1);
    s.vc_stride_head = a.v_cache.stride(2);
    s.kv_indices = c.kv_indices;
    s.k_scale = fp8 ? float(a.k_scale) : 1.f;
    s.v_scale = fp8 ? float(a.v_scale) : 1.f;
    s.num_kv_heads = int32_t(Hkv);
    s.head_dim = int32_t(D);
    s.page_size = int32_t(page);
    s.src_dtype = c.q_dtype;
    s.kv_dtype = c.kv_dtype;
    s.plan = c.plan;
  }
  return L;
}

// ---- planning (shared by the CPU and CUDA plan_upload) ----

static void check_host_int32(const at::Tensor& t, const char* name, int64_t numel) {
  TORCH_CHECK(t.device().is_cpu(), "mixed_attn.plan: ", name,
              " must be a host (CPU) tensor: planning never reads device memory, got ", t.device());
  TORCH_CHECK(t.scalar_type() == at::kInt, "mixed_attn.plan: ", name, " must be int32, got ", t.scalar_type());
  TORCH_CHECK(t.dim() == 1 && t.is_contiguous(), "mixed_attn.plan: ", name, " must be a contiguous 1-D tensor");
  if (numel >= 0)
    TORCH_CHECK(t.numel() == numel, "mixed_attn.plan: ", name, " must have ", numel, " entries, got ", t.numel());
}

PlanConfig plan_config(c10::IntArrayRef config, int64_t meta_capacity) {
  // A wrapper passes the same config every step: the last one this thread decoded (keyed by its
  // values, so a config changed in place is decoded again). Rejected configs are never kept, so
  // their error is raised every time.
  struct Last {
    int64_t values[kCfgNumFields];
    PlanConfig cfg;
    bool valid = false;
  };
  thread_local Last last;
  const size_t bytes = sizeof(int64_t) * kCfgNumFields;
  if (!(last.valid && config.size() == size_t(kCfgNumFields) && std::memcmp(last.values, config.data(), bytes) == 0)) {
    PlanConfig cfg;
    const std::string err = config_from_list(config.data(), int64_t(config.size()), &cfg);
    TORCH_CHECK(err.empty(), "mixed_attn.plan: ", err);
    std::memcpy(last.values, config.data(), bytes);
    last.cfg = cfg;
    last.valid = true;
  }
  PlanConfig cfg = last.cfg;
  cfg.meta_capacity = meta_capacity;
  return cfg;
}

std::vector<int64_t> plan_host(const at::Tensor& qo_indptr, const at::Tensor& kv_indptr, const at::Tensor& seq_lens,
                               const at::Tensor& meta_out, c10::IntArrayRef config) {
  check_host_int32(qo_indptr, "qo_indptr", -1);
  TORCH_CHECK(qo_indptr.numel() >= 2, "mixed_attn.plan: qo_indptr needs at least 2 entries (one row), got ",
              qo_indptr.numel());
  const int64_t B = qo_indptr.numel() - 1;
  check_host_int32(kv_indptr, "kv_indptr", B + 1);
  check_host_int32(seq_lens, "seq_lens", B);
  check_host_int32(meta_out, "meta_out", -1);
  const PlanConfig cfg = plan_config(config, meta_out.numel());
  PlanInputs in{qo_indptr.data_ptr<int32_t>(), kv_indptr.data_ptr<int32_t>(), seq_lens.data_ptr<int32_t>(), int32_t(B)};
  PlanResult r = plan_step(cfg, in, meta_out.data_ptr<int32_t>());
  TORCH_CHECK(r.ok, "mixed_attn.plan: ", r.error);
  return r.info;
}

c10::IntArrayRef config_list(const at::Tensor& config) {
  TORCH_CHECK(
      config.device().is_cpu() && config.scalar_type() == at::kLong && config.dim() == 1 && config.is_contiguous(),
      "mixed_attn.plan_upload: config must be a contiguous 1-D int64 host tensor");
  return c10::IntArrayRef(config.data_ptr<int64_t>(), size_t(config.numel()));
}

void check_upload_target(const at::Tensor& meta_host, const at::Tensor& meta_device) {
  TORCH_CHECK(meta_device.scalar_type() == at::kInt && meta_device.dim() == 1 && meta_device.is_contiguous(),
              "mixed_attn.plan_upload: meta_device must be a contiguous 1-D int32 tensor");
  TORCH_CHECK(meta_device.numel() >= meta_host.numel(), "mixed_attn.plan_upload: meta_device holds ",
              meta_device.numel(), " entries, meta_host ", meta_host.numel());
}

}  // namespace mixed_attn
