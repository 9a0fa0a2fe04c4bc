// Extend kernel instantiations for head_dim 128 (one file per head dim so the
// build compiles them in parallel).
#include "cuda/extend/portable/kernel.cuh"
#include "cuda/extend/sm90/launch.cuh"

namespace mixed_attn::gpu::extend_detail {
template const char* launch_extend_impl<128, ma_bf16, false>(const ExtendParams&, gpuStream_t);
template const char* launch_extend_impl<128, ma_half, false>(const ExtendParams&, gpuStream_t);
#if !defined(MA_NO_FP8)  // MIXED_ATTN_FP8=OFF
template const char* launch_extend_impl<128, ma_bf16, true>(const ExtendParams&, gpuStream_t);
template const char* launch_extend_impl<128, ma_half, true>(const ExtendParams&, gpuStream_t);
#endif
#if !defined(MA_NO_EXTEND_SM90)  // MIXED_ATTN_EXTEND_SM90=OFF
template const char* launch_extend_sm90_impl<128, extend_sm90_wgs(128), ma_bf16, false>(const ExtendParams&,
                                                                                        gpuStream_t);
template const char* launch_extend_sm90_impl<128, extend_sm90_wgs(128), ma_half, false>(const ExtendParams&,
                                                                                        gpuStream_t);
// The 128-row shape (16-bit caches only; launch_policy.h, extend_sm90_alt_block_rows).
#if MA_SM90_D128_WGS == 3
template const char* launch_extend_sm90_impl<128, 2, ma_bf16, false>(const ExtendParams&, gpuStream_t);
template const char* launch_extend_sm90_impl<128, 2, ma_half, false>(const ExtendParams&, gpuStream_t);
#endif
#if !defined(MA_NO_FP8)
template const char* launch_extend_sm90_impl<128, extend_sm90_wgs(128), ma_bf16, true>(const ExtendParams&,
                                                                                       gpuStream_t);
template const char* launch_extend_sm90_impl<128, extend_sm90_wgs(128), ma_half, true>(const ExtendParams&,
                                                                                       gpuStream_t);
#endif
#endif
}  // namespace mixed_attn::gpu::extend_detail
#if MA_SM90_TIMELINE && !defined(MA_NO_EXTEND_SM90)
MA_SM90_TIMELINE_EXPORT(ma_sm90_timeline_hd128)
#endif
#if MA_SM90_LAB_STREAM && !defined(MA_NO_EXTEND_SM90) && defined(MA_CUDA)
MA_LAB_STREAM_EXPORT(ma_lab_stream_issued)  // lab probe: tools/lab_stream_probe.py
#endif
