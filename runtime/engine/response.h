// An op every rank agreed to run (or to fail) in this cycle: the outcome of negotiation for one
// named tensor. Responses are computed identically on every rank (from the same gathered data or
// the same cache entry), so executing them in list order keeps the ranks in lock step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine/request.h"

namespace hora::detail::engine {

struct Response {
  // The agreed signature. For allgather, request.count is meaningless: see rank_counts.
  Request request;
  // Allgather only: the element count of every rank, indexed by rank.
  std::vector<std::uint64_t> rank_counts;
  // Non-empty when the ranks disagreed (MismatchError on every rank) or the op was abandoned by
  // the stall check (TimeoutError on the ranks that submitted it).
  std::string error;
  enum class ErrorKind : std::uint8_t { kNone, kMismatch, kStalled };
  ErrorKind error_kind = ErrorKind::kNone;

  bool ok() const { return error_kind == ErrorKind::kNone; }
  // Whether this rank's request `mine` is the same op as this (successful) response: the cache
  // lookup test. For allgather, mine.count must equal rank_counts[rank].
  bool matches(const Request& mine, int rank) const;
  // Bytes of this rank's input (allreduce: the fusion size).
  std::size_t bytes() const;
};

}  // namespace hora::detail::engine
