// The driver's cuTensorMapEncodeTiled, fetched once through the runtime's entry-point
// query (defined in device_desc.cu), so that nothing links against libcuda.
#pragma once
#include "mixed_attn/compat.h"

#if defined(MA_CUDA)
#include <cuda.h>  // CUtensorMap and the encoder's argument types

namespace mixed_attn::gpu {
using TensorMapEncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                       const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                       CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
// nullptr when the driver does not export it (then DeviceDesc.tma_encoder is false).
TensorMapEncodeFn tensor_map_encoder();
}  // namespace mixed_attn::gpu
#endif
