// The public API of <hora/cuda.h>: the stream overloads forward to the process's Runtime, which
// routes them (device buffers -> NCCL, host buffers -> the host path after the stream settles).
// Without NCCL every one of them says how to rebuild, whether or not hora::init() ran.
#include <hora/cuda.h>

#include "runtime/nccl/backend.h"
#include "runtime/process/process.h"
#include "runtime/process/runtime.h"

namespace hora {
namespace {

namespace nccl = detail::nccl;

// The Runtime for one stream call; throws "built without NCCL" first when it is.
std::shared_ptr<detail::Runtime> runtime(const char* what, const char* api_name) {
  if (!nccl::compiled()) nccl::throw_not_built(api_name);
  return detail::Process::instance().runtime(what);
}

}  // namespace

bool cuda_built() { return nccl::compiled(); }

int nccl_version() { return nccl::version(); }

bool gpu_available() { return nccl::gpu_available(); }

int cuda_device() { return runtime("cuda_device()", "hora::cuda_device()")->cuda_device(); }

void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
               void* stream, Scope scope) {
  runtime("allreduce", "hora::allreduce with a CUDA stream")
      ->allreduce(sendbuf, recvbuf, count, type, op, scope, stream);
}

void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
               const std::vector<std::size_t>& counts, DataType type, void* stream, Scope scope) {
  runtime("allgather", "hora::allgather with a CUDA stream")
      ->allgather(sendbuf, count, recvbuf, counts, type, scope, stream);
}

void broadcast(void* buffer, std::size_t count, DataType type, int root, void* stream,
               Scope scope) {
  runtime("broadcast", "hora::broadcast with a CUDA stream")
      ->broadcast(buffer, count, type, root, scope, stream);
}

void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
              const std::vector<std::size_t>& recv_splits, DataType type, void* stream,
              Scope scope) {
  runtime("alltoall", "hora::alltoall with a CUDA stream")
      ->alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, scope, stream);
}

void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                   ReduceOp op, void* stream, Scope scope) {
  runtime("reducescatter", "hora::reducescatter with a CUDA stream")
      ->reducescatter(sendbuf, count, recvbuf, type, op, scope, stream);
}

void barrier(void* stream, Scope scope) {
  runtime("barrier", "hora::barrier with a CUDA stream")->barrier(scope, stream);
}

}  // namespace hora
