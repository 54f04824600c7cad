// The public API of <hora/process_set.h>: sets are added and removed by the Process, which
// holds each set's Runtime and engine (runtime/process/process.h); a collective on a set takes
// the set's Runtime for its duration and runs on its global scope.
#include <hora/process_set.h>

#include "runtime/process/process.h"
#include "runtime/process/runtime.h"

namespace hora {
namespace {

detail::Process& process() { return detail::Process::instance(); }

std::shared_ptr<detail::Runtime> runtime(const char* what, ProcessSet set) {
  return process().runtime(what, set.id);
}

}  // namespace

ProcessSet add_process_set(std::vector<int> ranks) {
  return ProcessSet{process().add_process_set(std::move(ranks))};
}

void remove_process_set(ProcessSet set) { process().remove_process_set(set.id); }

std::vector<ProcessSet> process_sets() {
  std::vector<ProcessSet> sets;
  for (int id : process().process_set_ids()) sets.push_back(ProcessSet{id});
  return sets;
}

std::vector<int> ranks(ProcessSet set) { return process().process_set_ranks("ranks()", set.id); }

int rank(ProcessSet set) {
  const std::vector<int> members = process().process_set_ranks("rank(set)", set.id);
  const int me = process().runtime("rank(set)")->rank(Scope::kGlobal);
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i] == me) return static_cast<int>(i);
  }
  return -1;
}

int size(ProcessSet set) {
  return static_cast<int>(process().process_set_ranks("size(set)", set.id).size());
}

bool included(ProcessSet set) { return rank(set) >= 0; }

void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
               ProcessSet set) {
  runtime("allreduce", set)->allreduce(sendbuf, recvbuf, count, type, op, Scope::kGlobal);
}

void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
               const std::vector<std::size_t>& counts, DataType type, ProcessSet set) {
  runtime("allgather", set)->allgather(sendbuf, count, recvbuf, counts, type, Scope::kGlobal);
}

std::vector<std::size_t> allgather_counts(std::size_t count, ProcessSet set) {
  return runtime("allgather_counts", set)->allgather_counts(count, Scope::kGlobal);
}

void broadcast(void* buffer, std::size_t count, DataType type, int root, ProcessSet set) {
  runtime("broadcast", set)->broadcast(buffer, count, type, root, Scope::kGlobal);
}

void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
              const std::vector<std::size_t>& recv_splits, DataType type, ProcessSet set) {
  runtime("alltoall", set)
      ->alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, Scope::kGlobal);
}

std::vector<std::size_t> alltoall_splits(const std::vector<std::size_t>& send_splits,
                                         ProcessSet set) {
  return runtime("alltoall_splits", set)->alltoall_splits(send_splits, Scope::kGlobal);
}

void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                   ReduceOp op, ProcessSet set) {
  runtime("reducescatter", set)->reducescatter(sendbuf, count, recvbuf, type, op, Scope::kGlobal);
}

void barrier(ProcessSet set) { runtime("barrier", set)->barrier(Scope::kGlobal); }

}  // namespace hora
