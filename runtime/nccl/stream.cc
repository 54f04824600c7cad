// CUDA stream synchronization for the Runtime's routing (runtime/process/runtime.cc): before a
// host collective given a stream, the work on it (a copy to the host) must have landed.
// disabled.cc replaces this file when NCCL is absent.
#include <cuda_runtime.h>

#include "runtime/nccl/backend.h"

namespace hora::detail::nccl {

std::string synchronize_stream(void* stream) {
  const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (e == cudaSuccess) return {};
  cudaGetLastError();  // clear it, so it does not surface in the caller's later CUDA calls
  return cudaGetErrorString(e);
}

}  // namespace hora::detail::nccl
