// <hora/cuda.h> with NCCL: routes each call by where its buffers live (device -> the attached
// NCCL Backend; host -> the Gloo collectives of <hora/hora.h>). disabled.cc replaces this file
// when NCCL is absent.
#include <hora/cuda.h>
#include <hora/hora.h>

#include <initializer_list>
#include <string>
#include <utility>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "runtime/nccl/backend.h"

namespace hora {

namespace {

namespace nccl = detail::nccl;

struct Buffer {
  const char* name;
  const void* ptr;
};

int my_rank() { return is_initialized() ? rank() : -1; }
std::string my_host() { return is_initialized() ? hostname() : std::string{}; }

std::string who() {
  if (!is_initialized()) return "hora";
  return fmt::format("rank {} of {} on {}", rank(), size(), hostname());
}

// True when the collective's buffers are on a GPU, false when they are in host memory. Null
// buffers (count 0) do not vote. Mixed buffers, and device buffers on another GPU than this
// rank's, are usage errors.
bool on_device(const char* op, std::initializer_list<Buffer> buffers) {
  const Buffer* device_buffer = nullptr;
  const Buffer* host_buffer = nullptr;
  nccl::PointerInfo device_info;
  for (const Buffer& b : buffers) {
    if (b.ptr == nullptr) continue;
    nccl::PointerInfo info = nccl::pointer_info(b.ptr);
    if (info.on_device) {
      if (device_buffer == nullptr) device_info = info;
      device_buffer = &b;
    } else {
      host_buffer = &b;
    }
  }
  if (device_buffer != nullptr && host_buffer != nullptr) {
    throw UsageError(fmt::format("{}: {}: {} is GPU memory but {} is host memory; pass both "
                                 "on this rank's GPU (NCCL) or both in host memory (Gloo)",
                                 who(), op, device_buffer->name, host_buffer->name),
                     my_rank(), my_host());
  }
  if (device_buffer == nullptr) return false;
  if (!device_info.managed) {
    int mine = nccl::current()->device();
    if (device_info.device != mine) {
      throw UsageError(fmt::format("{}: {}: {} is memory of GPU {}, but this rank uses GPU {} "
                                   "(local rank, or HORA_CUDA_DEVICE); allocate it after "
                                   "cudaSetDevice(hora::cuda_device())",
                                   who(), op, device_buffer->name, device_info.device, mine),
                       my_rank(), my_host());
    }
  }
  return true;
}

// Before a host-memory collective: work on `stream` (a copy to the host) must have landed.
// cudaStreamSynchronize cannot hang on a peer: the stream holds only this process's work.
void settle(const char* op, void* stream) {
  if (stream == nullptr) return;
  if (!nccl::gpu_available()) {
    throw UsageError(fmt::format("{}: {}: a CUDA stream was given but no GPU is visible to "
                                 "this rank; pass nullptr",
                                 who(), op),
                     my_rank(), my_host());
  }
  cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(fmt::format("{}: {}: synchronizing the stream before the host collective "
                            "failed: {}",
                            who(), op, cudaGetErrorString(e)),
                my_rank(), my_host());
  }
}

}  // namespace

bool cuda_built() { return true; }

bool gpu_available() { return nccl::gpu_available(); }

int cuda_device() { return nccl::current()->device(); }

void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
               ReduceOp op, void* stream, Scope scope) {
  if (on_device("allreduce", {{"sendbuf", sendbuf}, {"recvbuf", recvbuf}})) {
    return nccl::current()->allreduce(sendbuf, recvbuf, count, type, op, scope, stream);
  }
  settle("allreduce", stream);
  allreduce(sendbuf, recvbuf, count, type, op, scope);
}

void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
               const std::vector<std::size_t>& counts, DataType type, void* stream,
               Scope scope) {
  if (on_device("allgather", {{"sendbuf", sendbuf}, {"recvbuf", recvbuf}})) {
    return nccl::current()->allgather(sendbuf, count, recvbuf, counts, type, scope, stream);
  }
  settle("allgather", stream);
  allgather(sendbuf, count, recvbuf, counts, type, scope);
}

void broadcast(void* buffer, std::size_t count, DataType type, int root, void* stream,
               Scope scope) {
  if (on_device("broadcast", {{"buffer", buffer}})) {
    return nccl::current()->broadcast(buffer, count, type, root, scope, stream);
  }
  settle("broadcast", stream);
  broadcast(buffer, count, type, root, scope);
}

void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
              const std::vector<std::size_t>& recv_splits, DataType type, void* stream,
              Scope scope) {
  if (on_device("alltoall", {{"sendbuf", sendbuf}, {"recvbuf", recvbuf}})) {
    return nccl::current()->alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, scope,
                                     stream);
  }
  settle("alltoall", stream);
  alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, scope);
}

void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                   ReduceOp op, void* stream, Scope scope) {
  if (on_device("reducescatter", {{"sendbuf", sendbuf}, {"recvbuf", recvbuf}})) {
    return nccl::current()->reducescatter(sendbuf, count, recvbuf, type, op, scope, stream);
  }
  settle("reducescatter", stream);
  reducescatter(sendbuf, count, recvbuf, type, op, scope);
}

void barrier(void* stream, Scope scope) {
  if (nccl::gpu_available()) return nccl::current()->barrier(scope, stream);
  settle("barrier", stream);
  barrier(scope);
}

}  // namespace hora
