// How many thread-block clusters of 1-4 CTAs of the sm_90a extend kernel's size fit on the GPU at
// once (cudaOccupancyMaxActiveClusters), so whether a KV split of 3 or 4 fills whole waves.
// A cluster runs on the SMs of one GPC, and an extend CTA fills an SM, so a GPC of n SMs holds
// floor(n / size) clusters: GPCs of 16 or 18 SMs leave SMs idle under clusters of 3.
// Build and run on the GPU machine:
//   nvcc -std=c++17 -arch=sm_90a -o /tmp/cluster_probe tools/cluster_capacity_probe.cu && /tmp/cluster_probe [smem_kb]
// (smem_kb: dynamic shared memory per CTA, default 200, about the head-dim-128 kernel's).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

__global__ void probe_kernel(int* out) {
  extern __shared__ int smem[];
  if (out != nullptr && threadIdx.x == 0) out[blockIdx.x] = smem[0];
}

int main(int argc, char** argv) {
  const int smem = (argc > 1 ? std::atoi(argv[1]) : 200) * 1024;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%s: %d SMs; %d KB dynamic shared memory a CTA, 384 threads\n", prop.name, prop.multiProcessorCount,
              smem / 1024);
  if (cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) {
    std::printf("cannot set %d bytes of dynamic shared memory\n", smem);
    return 1;
  }
  for (int size = 1; size <= 4; ++size) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(unsigned(size * 132));
    config.blockDim = dim3(384);
    config.dynamicSmemBytes = size_t(smem);
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = unsigned(size);
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
    int clusters = 0;
    const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, probe_kernel, &config);
    if (e != cudaSuccess) {
      std::printf("cluster %d: %s\n", size, cudaGetErrorString(e));
      continue;
    }
    std::printf("cluster %d: %d clusters at once = %d CTAs (%d SMs idle)\n", size, clusters, clusters * size,
                prop.multiProcessorCount - clusters * size);
  }
  return 0;
}
