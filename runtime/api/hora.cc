// The public API (hora.h): each call forwards to the process's Runtime (runtime.h), which
// checks the arguments and dispatches to a backend.
#include <hora/hora.h>

#include <initializer_list>

#include <fmt/format.h>
#include <hora/cuda.h>

#include "runtime/nccl/backend.h"
#include "runtime/src/runtime.h"

namespace hora {

using detail::process_runtime;

namespace {

// GPU buffers passed to the host API go to the stream overloads of <hora/cuda.h> on the default
// stream, which route them to NCCL (and reject mixed host/GPU arguments). They send host
// buffers back here, so there is no loop. Without NCCL or a GPU this costs one cached check.
bool on_gpu(std::initializer_list<const void*> buffers) {
  if (!detail::nccl::gpu_available()) return false;
  for (const void* p : buffers) {
    if (p != nullptr && detail::nccl::is_device_pointer(p)) return true;
  }
  return false;
}

void* const kDefaultStream = nullptr;

}  // namespace

void init() { detail::process_init(); }

void shutdown() { detail::process_shutdown(); }

bool is_initialized() { return detail::process_initialized(); }

int rank() { return process_runtime("rank()")->rank(Scope::kGlobal); }
int size() { return process_runtime("size()")->size(Scope::kGlobal); }
int local_rank() { return process_runtime("local_rank()")->rank(Scope::kLocal); }
int local_size() { return process_runtime("local_size()")->size(Scope::kLocal); }
int cross_rank() { return process_runtime("cross_rank()")->rank(Scope::kCross); }
int cross_size() { return process_runtime("cross_size()")->size(Scope::kCross); }
const std::string& hostname() { return detail::process_hostname("hostname()"); }

void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
               Scope scope) {
  if (on_gpu({sendbuf, recvbuf})) {
    return allreduce(sendbuf, recvbuf, count, type, op, kDefaultStream, scope);
  }
  process_runtime("allreduce")->allreduce(sendbuf, recvbuf, count, type, op, scope);
}

void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
               const std::vector<std::size_t>& counts, DataType type, Scope scope) {
  if (on_gpu({sendbuf, recvbuf})) {
    return allgather(sendbuf, count, recvbuf, counts, type, kDefaultStream, scope);
  }
  process_runtime("allgather")->allgather(sendbuf, count, recvbuf, counts, type, scope);
}

std::vector<std::size_t> allgather_counts(std::size_t count, Scope scope) {
  return process_runtime("allgather_counts")->allgather_counts(count, scope);
}

void broadcast(void* buffer, std::size_t count, DataType type, int root, Scope scope) {
  if (on_gpu({buffer})) return broadcast(buffer, count, type, root, kDefaultStream, scope);
  process_runtime("broadcast")->broadcast(buffer, count, type, root, scope);
}

void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
              const std::vector<std::size_t>& recv_splits, DataType type, Scope scope) {
  if (on_gpu({sendbuf, recvbuf})) {
    return alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, kDefaultStream, scope);
  }
  process_runtime("alltoall")->alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, scope);
}

std::vector<std::size_t> alltoall_splits(const std::vector<std::size_t>& send_splits,
                                         Scope scope) {
  return process_runtime("alltoall_splits")->alltoall_splits(send_splits, scope);
}

void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                   ReduceOp op, Scope scope) {
  if (on_gpu({sendbuf, recvbuf})) {
    return reducescatter(sendbuf, count, recvbuf, type, op, kDefaultStream, scope);
  }
  process_runtime("reducescatter")->reducescatter(sendbuf, count, recvbuf, type, op, scope);
}

std::size_t reducescatter_count(std::size_t count, int rank, int nranks) {
  if (nranks <= 0 || rank < 0 || rank >= nranks) {
    throw UsageError(fmt::format("hora::reducescatter_count: rank {} is not in 0..{} (nranks = {})",
                                 rank, nranks - 1, nranks));
  }
  const std::size_t n = static_cast<std::size_t>(nranks);
  return count / n + (static_cast<std::size_t>(rank) < count % n ? 1 : 0);
}

void barrier(Scope scope) { process_runtime("barrier")->barrier(scope); }

}  // namespace hora
