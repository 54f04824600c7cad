#include "runtime/gloo/op_check.h"

#include <cstring>
#include <iterator>

#include <fmt/format.h>

#include "common/fnv.h"

namespace hora::detail::gloo {

std::uint64_t hash_counts(const std::vector<std::size_t>& counts) {
  Fnv1a64 h;
  for (std::size_t c : counts) h.word(c);
  return h.value();
}

OpHeader make_header(OpKind kind, int rank, std::size_t count, const DataType* type,
                     const ReduceOp* op, int root, std::uint64_t counts_hash,
                     std::uint64_t balance) {
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

void merge_checks(void* out, const void* a, const void* b, std::size_t /*bytes*/) {
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

std::string describe_header(const OpHeader& h) {
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

std::string check_problem(const OpCheck& c) {
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
