// The public API of <hora/hora.h>: each call takes the process's Runtime for its duration
// (runtime/process/process.h) and forwards to it; the Runtime checks the arguments and routes
// the op to a backend.
#include <hora/hora.h>

#include "runtime/process/process.h"
#include "runtime/process/runtime.h"

namespace hora {
namespace {

std::shared_ptr<detail::Runtime> runtime(const char* what) {
  return detail::Process::instance().runtime(what);
}

}  // namespace

void init() { detail::Process::instance().init(); }

void shutdown() { detail::Process::instance().shutdown(); }

bool is_initialized() { return detail::Process::instance().initialized(); }

int rank() { return runtime("rank()")->rank(Scope::kGlobal); }
int size() { return runtime("size()")->size(Scope::kGlobal); }
int local_rank() { return runtime("local_rank()")->rank(Scope::kLocal); }
int local_size() { return runtime("local_size()")->size(Scope::kLocal); }
int cross_rank() { return runtime("cross_rank()")->rank(Scope::kCross); }
int cross_size() { return runtime("cross_size()")->size(Scope::kCross); }
const std::string& hostname() { return detail::Process::instance().hostname("hostname()"); }

void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
               Scope scope) {
  runtime("allreduce")->allreduce(sendbuf, recvbuf, count, type, op, scope);
}

void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
               const std::vector<std::size_t>& counts, DataType type, Scope scope) {
  runtime("allgather")->allgather(sendbuf, count, recvbuf, counts, type, scope);
}

std::vector<std::size_t> allgather_counts(std::size_t count, Scope scope) {
  return runtime("allgather_counts")->allgather_counts(count, scope);
}

void broadcast(void* buffer, std::size_t count, DataType type, int root, Scope scope) {
  runtime("broadcast")->broadcast(buffer, count, type, root, scope);
}

void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
              const std::vector<std::size_t>& recv_splits, DataType type, Scope scope) {
  runtime("alltoall")->alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, scope);
}

std::vector<std::size_t> alltoall_splits(const std::vector<std::size_t>& send_splits, Scope scope) {
  return runtime("alltoall_splits")->alltoall_splits(send_splits, scope);
}

void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                   ReduceOp op, Scope scope) {
  runtime("reducescatter")->reducescatter(sendbuf, count, recvbuf, type, op, scope);
}

void barrier(Scope scope) { runtime("barrier")->barrier(scope); }

}  // namespace hora
