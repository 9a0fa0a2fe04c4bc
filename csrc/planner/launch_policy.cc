// The launch policy: see mixed_attn/launch_policy.h.
#include "mixed_attn/launch_policy.h"

#include <algorithm>
#include <sstream>

namespace mixed_attn {
namespace {

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

std::string describe(const DeviceDesc& d) {
  switch (d.kind) {
    case DeviceKind::kCpu: return "the CPU";
    case DeviceKind::kHip: return d.hip_mfma ? "an AMD GPU" : "an AMD GPU without CDNA2/CDNA3 MFMA";
    case DeviceKind::kCuda:
      return cat("a compute-capability ", d.arch / 10, ".", d.arch % 10, " GPU",
                 d.sm90_extend ? "" : (d.arch == 90 ? " (this build has no sm_90a code)" : ""));
  }
  return "an unknown device";
}

}  // namespace

const char* extend_kernel_name(ExtendKernel k) {
  switch (k) {
    case ExtendKernel::kAuto: return "auto";
    case ExtendKernel::kMma: return "mma";
    case ExtendKernel::kSm90: return "sm90";
    case ExtendKernel::kHost: return "cpu";
  }
  return "?";
}

const char* decode_kernel_name(DecodeKernel k) {
  switch (k) {
    case DecodeKernel::kAuto: return "auto";
    case DecodeKernel::kTensorCore: return "tensor_core";
    case DecodeKernel::kPortable: return "portable";
    case DecodeKernel::kHost: return "cpu";
    case DecodeKernel::kTensorCoreNarrow: return "tensor_core_narrow";
  }
  return "?";
}

std::string choose_launch_policy(const DeviceDesc& dev, int32_t head_dim, int32_t group_size, int32_t page_size,
                                 bool kv_fp8, const LaunchRequest& req, LaunchPolicy* out) {
  LaunchPolicy p;
  if (group_size < 1) return cat("num_qo_heads / num_kv_heads must be >= 1, got ", group_size);

  // The extend kernel family.
  const ExtendKernel want = req.extend_kernel;
  if (dev.kind == DeviceKind::kCpu) {
    if (want == ExtendKernel::kMma || want == ExtendKernel::kSm90)
      return cat("extend_backend='", extend_kernel_name(want), "' is a GPU kernel: the plan is for the CPU");
    p.extend_kernel = ExtendKernel::kHost;
  } else {
    if (want == ExtendKernel::kHost)
      return cat("extend_backend='cpu' plans for the CPU implementation, but the device is ", describe(dev));
    // The HIP kernel's MFMA loop is compiled for CDNA2/CDNA3 only (extend/portable/mma.cuh sets
    // MA_EXTEND_HAS_MMA); built for another AMD GPU its body would be empty.
    if (dev.kind == DeviceKind::kHip && !dev.hip_mfma)
      return cat(
          "the HIP extend kernel needs an AMD CDNA2/CDNA3 GPU (gfx90a, gfx94x) with MFMA bf16/fp16 "
          "instructions; the device is ",
          describe(dev));
    if (want == ExtendKernel::kSm90) {
      if (!dev.sm90_extend)
        return cat("extend_backend='sm90' needs an sm_90a build on a compute-capability 9.0 GPU; the device is ",
                   describe(dev));
      p.extend_kernel = ExtendKernel::kSm90;
    } else if (want == ExtendKernel::kMma) {
      p.extend_kernel = ExtendKernel::kMma;
    } else {
      p.extend_kernel = dev.sm90_extend ? ExtendKernel::kSm90 : ExtendKernel::kMma;
    }
  }
  switch (p.extend_kernel) {
    case ExtendKernel::kSm90:
      p.extend_block_rows = extend_sm90_block_rows(head_dim);
      p.extend_max_kv_splits = kSm90MaxKvSplits;
      // The kernel's second shape (head dim 128, 16-bit caches): per step by the estimate, unless
      // the request fixes the rows or the tile tokens (plan.cc, step 3e).
      if (!kv_fp8 && extend_sm90_alt_block_rows(head_dim) > 0) {
        if (req.extend_block_rows == extend_sm90_alt_block_rows(head_dim)) p.extend_block_rows = req.extend_block_rows;
        else if (req.extend_block_rows == 0 && req.extend_tile_tokens == 0)
          p.extend_alt_block_rows = extend_sm90_alt_block_rows(head_dim);
      }
      break;
    case ExtendKernel::kMma: p.extend_block_rows = extend_mma_block_rows(head_dim, dev.kind == DeviceKind::kHip); break;
    default: p.extend_block_rows = kHostTileTokens; break;
  }
  if (p.extend_block_rows < 1) return cat("head_dim must be 64, 128 or 256, got ", head_dim);
  if (req.extend_block_rows != 0 && req.extend_block_rows != p.extend_block_rows)
    return cat("extend_block_rows=", req.extend_block_rows, ": the ", extend_kernel_name(p.extend_kernel),
               " extend kernel at head dim ", head_dim, kv_fp8 ? " with an fp8 cache" : "", " has tiles of ",
               p.extend_block_rows,
               p.extend_kernel == ExtendKernel::kSm90 && !kv_fp8 && extend_sm90_alt_block_rows(head_dim) > 0
                   ? cat(" or ", extend_sm90_alt_block_rows(head_dim))
                   : std::string(),
               " rows (0: the policy's)");
  if (p.extend_kernel == ExtendKernel::kHost) {
    p.extend_pack = 1;
    p.extend_tile_tokens = kHostTileTokens;
  } else {
    p.extend_pack = pack_factor(group_size, p.extend_block_rows);
    p.extend_tile_tokens = p.extend_block_rows / p.extend_pack;
    if (p.extend_alt_block_rows > 0) {
      p.extend_alt_pack = pack_factor(group_size, p.extend_alt_block_rows);
      p.extend_alt_tile_tokens = p.extend_alt_block_rows / p.extend_alt_pack;
    }
  }

  // TMA for the sm_90a kernel's interior K/V tiles (one tensor copy per 16 keys of a page, so
  // pages of a multiple of 16 slots) is there on request only: with today's producer cp.async is
  // as fast at head dims 64 and 128 and clearly faster at 256 (benchmarks/RESULTS.md, session 17).
  // fp8 caches: cp.async into staging tiles that the producer widens (extend/sm90/producer.cuh).
  const bool tma_fits = p.extend_kernel == ExtendKernel::kSm90 && dev.tma_encoder && page_size % 16 == 0 && !kv_fp8;
  if (req.extend_tma == 1 && !tma_fits)
    return cat(
        "extend_tma=1 needs the sm90 extend kernel, a driver with cuTensorMapEncodeTiled, a page_size "
        "that is a multiple of 16 and a bf16/fp16 cache (kernel ",
        extend_kernel_name(p.extend_kernel), ", page_size ", page_size, kv_fp8 ? ", fp8 cache" : "", ")");
  p.extend_tma = req.extend_tma == 1;
  // Q by TMA (any page size and cache type: q is always 16-bit): head_dim / 64 tensor copies for a
  // tile's Q, issued by one thread, instead of the producer's 16-byte copies, which took about
  // 0.2 us a warp instruction to issue at the start of an item (benchmarks/RESULTS.md, session 22:
  // 4.6 us for a 192-row Q, most of an item's wait before its first S).
  const bool q_tma_fits = p.extend_kernel == ExtendKernel::kSm90 && dev.tma_encoder;
  if (req.extend_q_tma == 1 && !q_tma_fits)
    return cat("extend_q_tma=1 needs the sm90 extend kernel and a driver with cuTensorMapEncodeTiled (kernel ",
               extend_kernel_name(p.extend_kernel), ")");
  p.extend_q_tma = req.extend_q_tma == -1 ? q_tma_fits : req.extend_q_tma == 1;
  // Persistent sm_90a launches (about one CTA per SM, each serving a share of the items): a CTA's
  // start-up is paid once per SM, not once per item (benchmarks/RESULTS.md, session 9).
  if (req.extend_persistent < -1 || req.extend_persistent > 1)
    return cat("extend_persistent must be -1 (policy), 0 or 1, got ", req.extend_persistent);
  if (req.extend_persistent == 1 && p.extend_kernel != ExtendKernel::kSm90)
    return cat("extend_persistent=1 needs the sm90 extend kernel (kernel ", extend_kernel_name(p.extend_kernel), ")");
  p.extend_persistent = p.extend_kernel == ExtendKernel::kSm90 && req.extend_persistent != 0;
  p.extend_persistent_fixed = p.extend_persistent && req.extend_persistent == 1;
  // Programmatic dependent launches (compute capability 9.0+, CUDA): the decode's stage 1 starts on
  // the SMs the extend's last CTAs leave idle, the merge's launch overlaps stage 1's last wave.
  // By default only beside the sm_90a extend, whose CTA fills an SM (registers), so no decode CTA
  // starts beside a running one; the mma.sync kernel's smaller CTAs (GPUs past 9.0) could share
  // an SM with decode CTAs, which slowed both when measured on the H200 (session 12): on request.
  if (req.pdl < -1 || req.pdl > 1) return cat("pdl must be -1 (policy), 0 or 1, got ", req.pdl);
  const bool pdl_fits = dev.kind == DeviceKind::kCuda && dev.arch >= 90;
  if (req.pdl == 1 && !pdl_fits)
    return cat("pdl=1 needs a CUDA GPU of compute capability 9.0 or newer (device arch ", dev.arch, ")");
  p.pdl = pdl_fits && (req.pdl == 1 || (req.pdl == -1 && p.extend_kernel == ExtendKernel::kSm90));
  if (req.extend_tile_tokens < 0) return cat("extend_tile_tokens must be >= 0, got ", req.extend_tile_tokens);
  if (req.extend_tile_tokens > 0) p.extend_tile_tokens = req.extend_tile_tokens;
  if (req.extend_kv_splits < 0) return cat("extend_kv_splits must be >= 0, got ", req.extend_kv_splits);
  // Cut items (a persistent launch's costliest items in parts, merged through the arena): the
  // remedy for whole items on whole rounds of CTAs (docs/extend_work_balance.md). A part's merge
  // runs after the tile's single pass, so only tiles of one pass are cut.
  if (req.extend_item_parts != -1 && (req.extend_item_parts < 1 || req.extend_item_parts > kExtendMaxItemParts))
    return cat("extend_item_parts must be -1 (policy) or in [1, ", kExtendMaxItemParts, "], got ",
               req.extend_item_parts);
  const bool one_pass = p.extend_tile_tokens <= p.extend_block_rows / p.extend_pack;
  // A request that shapes the persistent sm90 launch (cut items, SMs left free): an error where the
  // launch cannot be persistent or is KV-split.
  auto persistent_only = [&](const char* name, int32_t value, const char* what,
                             const char* split_reason) -> std::string {
    if (!p.extend_persistent)
      return cat(name, "=", value, " ", what, ": it needs the sm90 extend kernel (kernel ",
                 extend_kernel_name(p.extend_kernel), ") and extend_persistent left on");
    if (req.extend_kv_splits > 1)
      return cat(name, "=", value, " and extend_kv_splits=", req.extend_kv_splits, " exclude each other (",
                 split_reason, ")");
    return {};
  };
  if (req.extend_item_parts > 1) {
    std::string err =
        persistent_only("extend_item_parts", req.extend_item_parts, "cuts the items of a persistent sm90 launch",
                        "cut items run in a persistent launch, KV splits as clusters");
    if (!err.empty()) return err;
    if (!one_pass)
      return cat("extend_item_parts=", req.extend_item_parts,
                 " needs tiles of one pass (extend_tile_tokens <= ", p.extend_block_rows / p.extend_pack, "), got ",
                 p.extend_tile_tokens);
  }
  p.extend_max_item_parts = !p.extend_persistent || !one_pass || req.extend_kv_splits > 1 ? 1
                            : req.extend_item_parts > 0                                   ? req.extend_item_parts
                                                                                          : kExtendMaxItemParts;
  p.extend_item_parts_fixed = req.extend_item_parts > 1;
  // SMs left to the decode (checked against num_sms in plan.cc, config_from_list): only a persistent
  // launch has a CTA count of its own to cap; a KV-split launch has one CTA per (tile, split).
  if (req.extend_leave_sms > 0) {
    std::string err = persistent_only("extend_leave_sms", req.extend_leave_sms, "caps a persistent sm90 launch",
                                      "a KV-split launch is not persistent");
    if (!err.empty()) return err;
  }
  p.extend_leave_sms = std::max(0, req.extend_leave_sms);
  // The policy's choice needs what a fixed N needs, and the decode as the extend's programmatic
  // dependent (else no decode CTA starts before the extend is done), and a launch the request does
  // not fix otherwise (KV split, every item cut).
  p.extend_leave_sms_auto = req.extend_leave_sms == -1 && p.extend_persistent && p.pdl && req.extend_kv_splits <= 1 &&
                            !p.extend_item_parts_fixed && req.decode_first != 1;
  // The decode's stage 1 before the extend: only programmatic launches overlap them (in ordinary
  // ones the order alone changes nothing), and SMs left to a decode that starts first are idle.
  if (req.decode_first < -1 || req.decode_first > 1)
    return cat("decode_first must be -1 (policy), 0 or 1, got ", req.decode_first);
  if (req.decode_first == 1 && !p.pdl)
    return cat("decode_first=1 needs programmatic launches (pdl: compute capability 9.0 or newer, not pdl=0); ",
               "this plan's are ordinary (device arch ", dev.arch, ", pdl=", req.pdl, ")");
  if (req.decode_first == 1 && req.extend_leave_sms > 0)
    return cat("decode_first=1 and extend_leave_sms=", req.extend_leave_sms,
               " exclude each other (the decode starts on every SM)");
  p.decode_first = req.decode_first == 1;
  // The policy's choice: where launches are programmatic (else the order changes nothing) and the
  // request leaves no SMs to the decode (they would idle while the decode runs first).
  p.decode_first_auto = req.decode_first == -1 && p.pdl && req.extend_leave_sms <= 0;

  // The decode stage-1 kernel.
  const DecodeKernel dwant = req.decode_kernel;
  if (dev.kind == DeviceKind::kCpu) {
    if (dwant != DecodeKernel::kAuto && dwant != DecodeKernel::kHost)
      return cat("decode_backend='", decode_kernel_name(dwant), "' is a GPU kernel: the plan is for the CPU");
    p.decode_kernel = DecodeKernel::kHost;
  } else if (dwant == DecodeKernel::kHost) {
    return cat("decode_backend='cpu' plans for the CPU implementation, but the device is ", describe(dev));
  } else if (dev.kind == DeviceKind::kHip) {
    if (dwant == DecodeKernel::kTensorCore || dwant == DecodeKernel::kTensorCoreNarrow)
      return cat("decode_backend='", decode_kernel_name(dwant), "' is a CUDA mma.sync kernel; AMD GPUs run 'portable'");
    p.decode_kernel = DecodeKernel::kPortable;
  } else {
    p.decode_kernel = dwant == DecodeKernel::kAuto ? DecodeKernel::kTensorCore : dwant;
    p.decode_narrow_when_fits =
        dwant == DecodeKernel::kAuto && decode_narrow_by_default(head_dim) && group_size <= kDecodeNarrowPairs;
  }
  const bool narrow = p.decode_kernel == DecodeKernel::kTensorCoreNarrow;
  if (narrow && group_size > kDecodeNarrowPairs)
    return cat("decode_backend='tensor_core_narrow' serves at most ", kDecodeNarrowPairs,
               " (query, head) pairs of a kv head a CTA; this model's GQA group is ", group_size);

  // Decode-class rows: by default those of at most kDecodeDefaultPairs (query, head) pairs (two
  // MMA blocks, one tensor-core CTA reading each K/V tile once for all of them); at four blocks
  // the extend kernel's wide tiles measured faster (benchmarks/RESULTS.md, "verify rows"). The
  // portable and host kernels take the same rows (one classification for every path).
  if (req.decode_max_q < 0 || req.decode_max_q > kDecodeMaxQueries)
    return cat("decode_max_q must be in [1, ", kDecodeMaxQueries, "] (0: the policy's), got ", req.decode_max_q);
  if (narrow && req.decode_max_q * group_size > kDecodeNarrowPairs)
    return cat("decode_max_q=", req.decode_max_q, " with decode_backend='tensor_core_narrow': ", req.decode_max_q,
               " queries x a GQA group of ", group_size, " pass the kernel's ", kDecodeNarrowPairs,
               " (query, head) pairs a CTA");
  if (req.decode_max_q > 0) {
    p.decode_max_q = req.decode_max_q;
  } else if (narrow) {
    p.decode_max_q = kDecodeNarrowPairs / group_size;  // the rows that fit one CTA
  } else {
    // Head dim 256: one 8-row half of one block. Graph-safe and deterministic launches are sized
    // for this bound, and there the two-block and the two-half kernels (its CTA has two warps and
    // few CTAs fit an SM) ran one-token rows 1.18-1.39x slower than the one-half kernel the
    // default plan picks (benchmarks/RESULTS.md, session 6, bench_decode G).
    const int pairs = head_dim >= 256 ? kDecodeBlockRows / 2 : kDecodeDefaultPairs;
    const int q = pairs / group_size;
    p.decode_max_q = q < 1 ? 1 : (q > kDecodeMaxQueries ? kDecodeMaxQueries : q);
  }
  // Two kv heads a decode CTA at head dim 64 (decode_step_kv_pack says why), on the wide
  // tensor-core kernel, for 16-bit and fp8 caches alike (an fp8 cache's CTA pays the same fixed
  // work for half the bytes again: benchmarks/RESULTS.md, session 25).
  if (req.decode_kv_pack < 0 || req.decode_kv_pack > 2)
    return cat("decode_kv_pack must be 0 (policy), 1 or 2, got ", req.decode_kv_pack);
  const bool pack_fits = p.decode_kernel == DecodeKernel::kTensorCore && head_dim == 64;
  if (req.decode_kv_pack == 2 && !pack_fits)
    return cat("decode_kv_pack=2 needs the tensor_core decode kernel at head dim 64 (kernel ",
               decode_kernel_name(p.decode_kernel), ", head dim ", head_dim, ")");
  p.decode_kv_pack = pack_fits && req.decode_kv_pack != 1 ? 2 : 1;
  *out = p;
  return {};
}

}  // namespace mixed_attn
