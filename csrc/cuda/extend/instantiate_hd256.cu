// Extend kernel instantiations for head_dim 256 (one file per head dim so the
// build compiles them in parallel).
#include "cuda/extend/portable/kernel.cuh"
#include "cuda/extend/sm90/launch.cuh"

namespace mixed_attn::gpu::extend_detail {
template const char* launch_extend_impl<256, ma_bf16, false>(const ExtendParams&, gpuStream_t);
template const char* launch_extend_impl<256, ma_half, false>(const ExtendParams&, gpuStream_t);
#if !defined(MA_NO_FP8)  // MIXED_ATTN_FP8=OFF
template const char* launch_extend_impl<256, ma_bf16, true>(const ExtendParams&, gpuStream_t);
template const char* launch_extend_impl<256, ma_half, true>(const ExtendParams&, gpuStream_t);
#endif
#if !defined(MA_NO_EXTEND_SM90)  // MIXED_ATTN_EXTEND_SM90=OFF
template const char* launch_extend_sm90_impl<256, extend_sm90_wgs(256), ma_bf16, false>(const ExtendParams&,
                                                                                        gpuStream_t);
template const char* launch_extend_sm90_impl<256, extend_sm90_wgs(256), ma_half, false>(const ExtendParams&,
                                                                                        gpuStream_t);
#if !defined(MA_NO_FP8)
template const char* launch_extend_sm90_impl<256, extend_sm90_wgs(256), ma_bf16, true>(const ExtendParams&,
                                                                                       gpuStream_t);
template const char* launch_extend_sm90_impl<256, extend_sm90_wgs(256), ma_half, true>(const ExtendParams&,
                                                                                       gpuStream_t);
#endif
#endif
}  // namespace mixed_attn::gpu::extend_detail
#if MA_SM90_TIMELINE && !defined(MA_NO_EXTEND_SM90)
MA_SM90_TIMELINE_EXPORT(ma_sm90_timeline_hd256)
#endif
