// Process sets: collectives on a subset of the job's ranks, as Horovod's process sets.
//
//   hora::ProcessSet evens = hora::add_process_set({0, 2});   // on EVERY rank, same ranks
//   if (hora::included(evens)) hora::allreduce(g, g, n, hora::DataType::kFloat32,
//                                              hora::ReduceOp::kAverage, evens);
//   hora::remove_process_set(evens);                            // on every rank again
//
// Adding and removing a set are collectives of the whole job: every rank calls them, members or
// not, with the same ranks and in the same order (they return once the set's members are
// connected). Each set has communicators of its own, formed through the rendezvous: a Gloo
// context for the blocking collectives, another for its async engine (its own background thread,
// negotiation and tensor fusion), and, when all its members are on one host, shared-memory
// groups instead (unless HORA_SHM=0). Sets may overlap. Ids start at 1 and are not reused.
//
// Inside a set, ranks are the set's: rank(set) is this rank's position among the set's ranks
// (ascending global ranks), a broadcast root is a set rank, allgather concatenates and alltoall
// splits in set-rank order, kAverage divides by size(set). A rank that is not a member may not
// call a collective on the set (UsageError). GPU buffers: process sets run on host memory only.
#pragma once

#include <cstddef>
#include <vector>

#include <hora/types.h>

namespace hora {

// Forms a set of `ranks` (global ranks; any order, no duplicates). Throws UsageError for an
// empty list, a rank outside 0..size()-1, a duplicate rank, or ranks equal to an existing set's
// (the whole job is the global set); no communication happens then, so every rank throws alike.
ProcessSet add_process_set(std::vector<int> ranks);
// Tears the set's communicators down (its engine finishes what was submitted first). The
// global set cannot be removed (UsageError), nor an unknown one.
void remove_process_set(ProcessSet set);

std::vector<ProcessSet> process_sets();  // the global set first, then by id
std::vector<int> ranks(ProcessSet set);  // the set's global ranks, ascending
int rank(ProcessSet set);                // this rank's rank in the set; -1: not a member
int size(ProcessSet set);
bool included(ProcessSet set);

// The blocking collectives of <hora/hora.h> on a set (host buffers).
void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
               ProcessSet set);
void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
               const std::vector<std::size_t>& counts, DataType type, ProcessSet set);
std::vector<std::size_t> allgather_counts(std::size_t count, ProcessSet set);
void broadcast(void* buffer, std::size_t count, DataType type, int root, ProcessSet set);
void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
              const std::vector<std::size_t>& recv_splits, DataType type, ProcessSet set);
std::vector<std::size_t> alltoall_splits(const std::vector<std::size_t>& send_splits,
                                         ProcessSet set);
void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                   ReduceOp op, ProcessSet set);
void barrier(ProcessSet set);

}  // namespace hora
