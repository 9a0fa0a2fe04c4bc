// Lab tool: C entry points for testing and timing extend-kernel variants without
// rebuilding the extension: tools/extend_shim.py compiles a one-line .cu that
// includes this header (with extend*.cu and the planner, under extra -D flags)
// into a shared library and calls it via ctypes (tools/sweep_extend.py; the GPU
// tests run against such a library when MA_EXTEND_LIB names it).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "cuda/launch.h"
#include "mixed_attn/plan.h"

extern "C" {

// Plans one step with the real planner. config: a PlanConfig list (kCfgNumFields
// entries, mixed_attn.plan_info.make_config). meta_out holds meta_cap entries, info_out
// kPlanNumFields. Returns 0, or -1 with the error in err.
int ma_ext_plan(const int32_t* qo_indptr, const int32_t* kv_indptr, const int32_t* seq_lens, int num_rows,
                const int64_t* config, int config_len, int32_t* meta_out, int64_t meta_cap, int64_t* info_out,
                char* err, int err_len) {
  mixed_attn::PlanConfig cfg;
  std::string e = mixed_attn::config_from_list(config, config_len, &cfg);
  mixed_attn::PlanResult r;
  if (e.empty()) {
    cfg.meta_capacity = meta_cap;
    mixed_attn::PlanInputs in{qo_indptr, kv_indptr, seq_lens, num_rows};
    r = mixed_attn::plan_step(cfg, in, meta_out);
    e = r.error;
  }
  if (!e.empty() || !r.ok) {
    std::strncpy(err, e.c_str(), err_len - 1);
    err[err_len - 1] = 0;
    return -1;
  }
  std::memcpy(info_out, r.info.data(), sizeof(int64_t) * r.info.size());
  return 0;
}

int ma_ext_num_plan_fields() { return mixed_attn::kPlanNumFields; }

int64_t ma_ext_meta_capacity(int64_t max_rows, int64_t max_tokens, int64_t tile_tokens) {
  return mixed_attn::plan_meta_capacity(max_rows, max_tokens, tile_tokens);
}

// ptrs: q, k_cache, v_cache, kv_indices, out, lse (or null), sinks (or null)
// ints: q_stride_token, q_stride_head, k_stride_page, k_stride_slot, k_stride_head,
//       v_stride_page, v_stride_slot, v_stride_head, out_stride_token, out_stride_head,
//       lse_stride_token, num_qo_heads, num_kv_heads, head_dim, page_size, window_left,
//       q_dtype, kv_dtype (mixed_attn::DType values), num_pages
// floats: sm_scale, logit_cap, k_scale, v_scale
// Returns null on success, else the launcher's error string.
const char* ma_ext_run(const int64_t* info, const int32_t* meta_device, void* const* ptrs, const int64_t* ints,
                       const float* floats, void* stream) {
  mixed_attn::ExtendParams p;
  mixed_attn::AttentionCommon& a = p.attn;
  a.q = ptrs[0];
  a.k_cache = ptrs[1];
  a.v_cache = ptrs[2];
  a.kv_indices = static_cast<const int32_t*>(ptrs[3]);
  a.out = ptrs[4];
  a.maybe_lse = static_cast<float*>(ptrs[5]);
  a.maybe_sinks = static_cast<const float*>(ptrs[6]);
  a.q_stride_token = ints[0];
  a.q_stride_head = ints[1];
  a.k_stride_page = ints[2];
  a.k_stride_slot = ints[3];
  a.k_stride_head = ints[4];
  a.v_stride_page = ints[5];
  a.v_stride_slot = ints[6];
  a.v_stride_head = ints[7];
  a.out_stride_token = ints[8];
  a.out_stride_head = ints[9];
  a.lse_stride_token = ints[10];
  a.num_qo_heads = int32_t(ints[11]);
  a.num_kv_heads = int32_t(ints[12]);
  a.head_dim = int32_t(ints[13]);
  a.page_size = int32_t(ints[14]);
  a.window_left = int32_t(ints[15]);
  a.q_dtype = static_cast<mixed_attn::DType>(ints[16]);
  a.kv_dtype = static_cast<mixed_attn::DType>(ints[17]);
  a.num_pages = ints[18];
  a.sm_scale = floats[0];
  a.logit_cap = floats[1];
  a.k_scale = floats[2];
  a.v_scale = floats[3];
  a.plan = mixed_attn::plan_view(info, meta_device);
  return mixed_attn::gpu::launch_extend(p, stream);
}

}  // extern "C"
