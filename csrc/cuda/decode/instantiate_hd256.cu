// Instantiations of the decode for head_dim 256 (one file per head dim: parallel builds).
#include "cuda/decode/launch_head_dim.cuh"

namespace mixed_attn::gpu::decode {
template const char* launch_decode_head_dim<256>(const DecodeParams&, DecodeKernel, gpuStream_t);
}  // namespace mixed_attn::gpu::decode
