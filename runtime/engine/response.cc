#include "runtime/engine/response.h"

namespace hora::detail::engine {

bool Response::matches(const Request& mine, int rank) const {
  if (!ok()) return false;
  const Request& r = request;
  if (mine.name != r.name || mine.type != r.type || mine.dtype != r.dtype ||
      mine.device != r.device) {
    return false;
  }
  if (r.has_reduce_op() && mine.op != r.op) return false;
  if (r.type == OpType::kBroadcast && mine.root != r.root) return false;
  if (r.count_must_match() && mine.count != r.count) return false;
  if (r.type == OpType::kAllgather) {
    if (rank < 0 || static_cast<std::size_t>(rank) >= rank_counts.size()) return false;
    if (rank_counts[static_cast<std::size_t>(rank)] != mine.count) return false;
  }
  return true;
}

std::size_t Response::bytes() const {
  return static_cast<std::size_t>(request.count) * size_of(request.dtype);
}

}  // namespace hora::detail::engine
