// Every schema of torch.ops.mixed_attn, in one place. Implementations are
// registered per backend in ops_cpu.cc and ops_cuda.cc; fakes for
// torch.compile live in python/mixed_attn/_ops.py.
#include <torch/library.h>

TORCH_LIBRARY(mixed_attn, m) {
  // Host planner (CPU tensors only). Writes the step's metadata into meta_out
  // (a pinned int32 buffer) and returns plan_info; the caller then issues the
  // one async host-to-device copy of meta_out[:plan_info[meta_len]]. `config`
  // is a PlanConfig as a list (field names: plan_field_names("config")).
  m.def(
      "plan(Tensor qo_indptr, Tensor kv_indptr, Tensor seq_lens, Tensor(a!) meta_out, "
      "int[] config) -> int[]");

  // plan, then the one async copy of meta_host[:meta_len] into meta_device (a pinned
  // host buffer and a device buffer; on the current stream), in one call. `config` is
  // the config list as a host int64 tensor (built once per wrapper: no list conversion
  // per step).
  m.def(
      "plan_upload(Tensor qo_indptr, Tensor kv_indptr, Tensor seq_lens, Tensor(a!) meta_host, "
      "Tensor(b!) meta_device, Tensor config) -> int[]");

  // The whole mixed step of one layer: KV save (when k and v are given), the
  // extend rows through the extend kernel, the decode rows through the split-KV
  // decode kernel (partials in the arena, then merged), into out (and lse).
  m.def(
      "forward(Tensor q, Tensor? k, Tensor? v, Tensor(a!) k_cache, Tensor(b!) v_cache, "
      "Tensor kv_indices, Tensor plan_meta, int[] plan_info, "
      "Tensor(c!)? partial_out, Tensor(d!)? partial_lse, Tensor(e!) out, Tensor(f!)? lse, "
      "Tensor? sinks, float sm_scale, float logit_cap, int window_left, "
      "float k_scale, float v_scale) -> ()");

  // The per-wrapper launch policy of a config: [extend_kernel, extend_block_rows,
  // extend_pack, extend_tile_tokens, extend_tma, decode_kernel, graph_max_tiles,
  // graph_max_partials, decode_max_q, extend_persistent, extend_max_item_parts,
  // extend_min_tile_tokens]; an error names
  // an override the device cannot honour.
  m.def("launch_policy(int[] config) -> int[]");

  // Field names of a plan config ("config") or of plan_info ("info"), in order.
  m.def("plan_field_names(str which) -> str[]");

  // What the planner needs to know of a device: [kind, arch, num_sms,
  // sm90_extend, tma_encoder, hip_mfma] (launch_policy.h, DeviceDesc).
  m.def("device_desc(Device device) -> int[]");

  // int32 entries a plan metadata buffer needs for this many rows and tokens (head_groups: Hq /
  // the extend pack, the items of a tile, where the policy may cut items: room for their counters).
  m.def("plan_meta_capacity(int max_rows, int max_tokens, int extend_tile_tokens, int head_groups=0) -> int");

  // What this binary was built for ("key=value": backend, GPU archs, torch, toolkit);
  // implemented in build_info.cc, read by mixed_attn.info().
  m.def("build_info() -> str[]");
}
