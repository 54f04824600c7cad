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
// async contexts) give every rank the same result. Header-only (runtime/meson.build lists the
// backend's sources).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <hora/types.h>

#include "common/fnv.h"
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

inline std::uint64_t hash_counts(const std::vector<std::size_t>& counts) {
  Fnv1a64 h;
  for (std::size_t c : counts) h.word(c);
  return h.value();
}

inline OpHeader make_header(OpKind kind, int rank, std::size_t count = 0,
                            const DataType* type = nullptr, const ReduceOp* op = nullptr,
                            int root = -1, std::uint64_t counts_hash = 0,
                            std::uint64_t balance = 0) {
  OpHeader h;
  h.kind = static_cast<std::uint8_t>(kind);
  h.rank = rank;
  h.count = count;
  h.has_type = type != nullptr;
  h.type = type != nullptr ? static_cast<std::uint8_t>(*type) : 0;
  h.has_op = op != nullptr;
  h.op = op != nullptr ? static_cast<std::uint8_t>(*op) : 0;
  h.root = root;
  h.counts_hash = counts_hash;
  h.balance = balance;
  // alltoall's totals differ across ranks by design: its splits are checked by the balance.
  const std::uint64_t agreed_count = kind == OpKind::kAlltoall ? 0 : h.count;
  h.signature = Fnv1a64()
                    .word(h.kind)
                    .word(agreed_count)
                    .word(h.type)
                    .word(h.op)
                    .word(static_cast<std::uint64_t>(static_cast<std::int64_t>(h.root)))
                    .word(h.counts_hash)
                    .value();
  return h;
}

inline bool header_less(const OpHeader& a, const OpHeader& b) {
  return a.signature != b.signature ? a.signature < b.signature : a.rank < b.rank;
}

inline OpCheck start_check(const OpHeader& mine) { return OpCheck{mine, mine, mine.balance}; }

// A ReduceFn (runtime/core/reduce.h) over one OpCheck of `bytes` bytes; out may alias a or b.
inline void merge_checks(void* out, const void* a, const void* b, std::size_t /*bytes*/) {
  OpCheck x;
  OpCheck y;
  std::memcpy(&x, a, sizeof x);
  std::memcpy(&y, b, sizeof y);
  OpCheck r;
  r.lo = header_less(y.lo, x.lo) ? y.lo : x.lo;
  r.hi = header_less(x.hi, y.hi) ? y.hi : x.hi;
  r.balance = x.balance + y.balance;
  std::memcpy(out, &r, sizeof r);
}

// "allreduce of 16 x float32 (sum)": what a header says its rank called.
inline std::string describe_header(const OpHeader& h) {
  static constexpr const char* kNames[] = {"allreduce",        "allgather",      "broadcast",
                                           "reducescatter",    "alltoall",       "barrier",
                                           "allgather_counts", "alltoall_splits"};
  std::string text = h.kind < std::size(kNames) ? kNames[h.kind] : "an unknown collective";
  if (h.has_type) {
    text += fmt::format(" of {} x {}", h.count, name_of(static_cast<DataType>(h.type)));
    if (h.kind == static_cast<std::uint8_t>(OpKind::kAllgather)) text += " in all";
  }
  if (h.has_op) text += fmt::format(" ({})", name_of(static_cast<ReduceOp>(h.op)));
  if (h.root >= 0) text += fmt::format(" from root {}", h.root);
  return text;
}

// Empty when the ranks agree; else why not (for "... failed: WHY").
inline std::string check_problem(const OpCheck& c) {
  if (c.lo.signature != c.hi.signature) {
    std::string lo = describe_header(c.lo);
    std::string hi = describe_header(c.hi);
    if (lo == hi) hi += " with other per-rank counts";
    return fmt::format(
        "the ranks disagree about it: rank {} called {}, but rank {} called {} (do all ranks "
        "call the same collectives in the same order, with the same counts, types, ops and "
        "roots?)",
        c.lo.rank, lo, c.hi.rank, hi);
  }
  if (c.balance != 0) {
    return "the ranks' send_splits and recv_splits disagree: some rank sends another rank a "
           "count that rank does not expect in its recv_splits (build recv_splits with "
           "hora::alltoall_splits())";
  }
  return {};
}

}  // namespace hora::detail::gloo
