// Every schema of torch.ops.mixed_attn, in one place. Implementations are
// registered per backend in ops_cpu.cc and ops_cuda.cc; fakes for
// torch.compile live in python/mixed_attn/_ops.py.
#include <torch/library.h>

TORCH_LIBRARY(mixed_attn, m) {
  // Host planner (CPU tensors only). Writes the step's metadata into meta_out
  // (a pinned int32 buffer) and returns plan_info; the caller then issues the
  // one async host-to-device copy of meta_out[:plan_info[meta_len]].
  m.def(
      "plan(Tensor qo_indptr, Tensor kv_indptr, Tensor seq_lens, Tensor(a!) meta_out, "
      "int page_size, int num_qo_heads, int num_kv_heads, int head_dim, int window_left, "
      "int mode, int num_sms, bool deterministic, int fixed_split_tokens, "
      "int max_splits_per_row, int extend_tile_tokens, int min_split_tokens=256, "
      "int ctas_per_sm=2) -> int[]");

  // The whole mixed step of one layer: KV save (when k and v are given), the
  // extend rows through the extend kernel, the decode rows through the split-KV
  // decode kernel (partials in the arena, then merged), into out (and lse).
  m.def(
      "forward(Tensor q, Tensor? k, Tensor? v, Tensor(a!) k_cache, Tensor(b!) v_cache, "
      "Tensor kv_indices, Tensor plan_meta, int[] plan_info, "
      "Tensor(c!)? partial_out, Tensor(d!)? partial_lse, Tensor(e!) out, Tensor(f!)? lse, "
      "Tensor? sinks, float sm_scale, float logit_cap, int window_left, "
      "float k_scale, float v_scale) -> ()");

  // Query tokens per extend tile that the backend of `device` expects in plans.
  m.def("extend_tile_tokens(Device device, int head_dim, int group_size) -> int");

  // int32 entries a plan metadata buffer needs for this many rows and tokens.
  m.def("plan_meta_capacity(int max_rows, int max_tokens, int extend_tile_tokens) -> int");

  // What this binary was built for ("key=value": backend, GPU archs, torch, toolkit);
  // implemented in build_info.cc, read by mixed_attn.info().
  m.def("build_info() -> str[]");
}
