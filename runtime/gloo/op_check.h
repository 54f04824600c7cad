// The consistency check that runs before each of the public API's collectives on Gloo
// (GlooBackend's Scope overloads; not the async engine's, which checks shapes itself).
//
// Gloo trusts every rank to pass the same counts: a rank that passes another one makes Gloo
// abort the process (an enforce in its I/O thread), hang to the timeout, or return wrong or
// truncated data without an error. So every rank first exchanges an OpHeader: what it is about
// to run (collective, count, type, op, root, a hash of allgather's counts) and its alltoall
// splits balance. The exchange has a fixed size whatever the arguments, so it always completes;
// then every rank holds the same merged OpCheck and either all run the collective or all throw
// MismatchError naming two ranks that disagree, before any data moves.
//
// The merge keeps the header with the lowest (signature, rank) and the one with the highest,
// and adds up the balances: associative and commutative, so an allreduce on the sync pairs
// (sync_allreduce.h, whole buffers, log2(n) latencies) and a local fold over an allgather (the
// async contexts) give every rank the same result. The functions are in op_check.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <hora/types.h>

#include "runtime/core/splits_balance.h"

namespace hora::detail::gloo {

// Which collective a header describes.
enum class OpKind : std::uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kReducescatter = 3,
  kAlltoall = 4,
  kBarrier = 5,
  kAllgatherCounts = 6,
  kAlltoallSplits = 7,
};

struct OpHeader {
  std::uint64_t signature = 0;    // of every field below but rank and balance
  std::uint64_t count = 0;        // elements (allgather: in all; alltoall: sent, not signed)
  std::uint64_t counts_hash = 0;  // allgather: the counts vector
  std::uint64_t balance = 0;      // alltoall: splits_balance()
  std::int32_t rank = 0;          // the global rank that sent it
  std::int32_t root = -1;         // broadcast
  std::uint8_t kind = 0;
  std::uint8_t type = 0;
  std::uint8_t op = 0;
  std::uint8_t has_type = 0;
  std::uint8_t has_op = 0;
  std::uint8_t pad[3] = {};
};

struct OpCheck {
  OpHeader lo;  // the lowest (signature, rank)
  OpHeader hi;  // the highest
  std::uint64_t balance = 0;
};
static_assert(std::is_trivially_copyable_v<OpCheck>);

std::uint64_t hash_counts(const std::vector<std::size_t>& counts);

OpHeader make_header(OpKind kind, int rank, std::size_t count = 0, const DataType* type = nullptr,
                     const ReduceOp* op = nullptr, int root = -1, std::uint64_t counts_hash = 0,
                     std::uint64_t balance = 0);

inline bool header_less(const OpHeader& a, const OpHeader& b) {
  return a.signature != b.signature ? a.signature < b.signature : a.rank < b.rank;
}

inline OpCheck start_check(const OpHeader& mine) { return OpCheck{mine, mine, mine.balance}; }

// A ReduceFn (runtime/core/reduce.h) over one OpCheck of `bytes` bytes; out may alias a or b.
void merge_checks(void* out, const void* a, const void* b, std::size_t bytes);

// "allreduce of 16 x float32 (sum)": what a header says its rank called.
std::string describe_header(const OpHeader& h);

// Empty when the ranks agree; else why not (for "... failed: WHY").
std::string check_problem(const OpCheck& c);

}  // namespace hora::detail::gloo
