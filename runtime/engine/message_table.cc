#include "runtime/engine/message_table.h"

#include <hora/error.h>

namespace hora::detail::engine {
namespace {

std::string quoted_name(const std::string& name) { return "'" + name + "'"; }

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// Horovod's shape rules (controller.cc, ConstructResponse) for two ranks that both gave a shape:
// allgather and alltoall need the same number of dimensions and the same dimensions after the
// first; every other op needs the same shape. Empty when they agree.
std::string shape_difference(const Request& x, const std::string& ra, const Request& y,
                             const std::string& rb) {
  if (x.shape.empty() || y.shape.empty()) return {};
  const std::string head = std::string("Mismatched ") + name_of(x.type) +
                           " tensor shapes for tensor " + quoted_name(x.name);
  const std::string who =
      ": " + ra + " sent " + shape_text(x.shape) + " but " + rb + " sent " + shape_text(y.shape);
  if (x.type != OpType::kAllgather && x.type != OpType::kAlltoall) {
    return x.shape == y.shape ? std::string() : head + who;
  }
  if (x.shape.size() != y.shape.size()) {
    return head + ": One or more ranks sent tensors of rank " + std::to_string(x.shape.size()) +
           ", but another rank sent a tensor of rank " + std::to_string(y.shape.size()) + who;
  }
  for (std::size_t d = 1; d < x.shape.size(); ++d) {
    if (x.shape[d] != y.shape[d]) {
      return head + ": One or more ranks sent tensors with different dimensions after the " +
             "first (dimension " + std::to_string(d) + ")" + who;
    }
  }
  return {};
}

// The first difference between the reference request (from rank `a`) and rank `b`'s request, as
// Horovod words it; empty when they agree.
std::string difference(const Request& x, int a, const Request& y, int b) {
  const std::string ra = "rank " + std::to_string(a);
  const std::string rb = "rank " + std::to_string(b);
  const std::string tensor = " for tensor " + quoted_name(x.name);
  if (x.type != y.type) {
    return "Mismatched collective operations" + tensor + ": " + ra + " submitted " +
           name_of(x.type) + " but " + rb + " submitted " + name_of(y.type);
  }
  const std::string op = name_of(x.type);
  if (x.dtype != y.dtype) {
    return "Mismatched " + op + " data types" + tensor + ": " + ra + " sent " + name_of(x.dtype) +
           " but " + rb + " sent " + name_of(y.dtype);
  }
  if (x.has_reduce_op() && x.op != y.op) {
    return "Mismatched " + op + " reduce operations" + tensor + ": " + ra + " asked for " +
           name_of(x.op) + " but " + rb + " asked for " + name_of(y.op);
  }
  if (x.type == OpType::kBroadcast && x.root != y.root) {
    return "Mismatched broadcast root ranks" + tensor + ": " + ra + " sent root " +
           std::to_string(x.root) + " but " + rb + " sent root " + std::to_string(y.root);
  }
  if (std::string diff = shape_difference(x, ra, y, rb); !diff.empty()) return diff;
  if (x.count_must_match() && x.count != y.count) {
    return "Mismatched " + op + " tensor shapes" + tensor + ": " + ra + " sent " +
           std::to_string(x.count) + " elements but " + rb + " sent " + std::to_string(y.count);
  }
  if (x.device != y.device) {
    auto dev = [](std::int32_t d) {
      return d == kCpuDevice ? std::string("host memory") : "GPU " + std::to_string(d);
    };
    return "Mismatched " + op + " devices" + tensor + ": " + ra + " used " + dev(x.device) +
           " but " + rb + " used " + dev(y.device);
  }
  return {};
}

}  // namespace

bool MessageTable::ready(const Entry& e) const {
  if (joined_count_ > 0) {
    // While a rank has joined, only allreduce (and the join) runs: any other op is refused as
    // soon as one rank submits it (take() says why), rather than when every rank that has not
    // joined has. Those ranks may never all submit the same name: an unnamed op's number
    // differs between a rank that joined in an earlier round and one that was refused there.
    for (const auto& slot : e.by_rank) {
      if (slot && slot->type != OpType::kAllreduce && slot->type != OpType::kJoin) return true;
    }
  }
  for (int r = 0; r < size_; ++r) {
    if (!e.by_rank[static_cast<std::size_t>(r)].has_value() &&
        !joined_[static_cast<std::size_t>(r)]) {
      return false;
    }
  }
  return true;
}

bool MessageTable::add(int rank, const Request& request, Clock::time_point first_seen) {
  auto [it, inserted] = entries_.try_emplace(request.name);
  Entry& e = it->second;
  if (inserted) {
    e.by_rank.resize(static_cast<std::size_t>(size_));
    e.first_seen = first_seen;
  } else if (first_seen < e.first_seen) {
    e.first_seen = first_seen;
  }
  auto& slot = e.by_rank[static_cast<std::size_t>(rank)];
  if (slot.has_value()) {
    throw Error("hora engine: rank " + std::to_string(rank) + " announced " +
                quoted_name(request.name) + " twice (internal error: names are unique among a " +
                "rank's in-flight ops)");
  }
  slot = request;
  ++e.submitted;
  if (request.type == OpType::kJoin && !joined_[static_cast<std::size_t>(rank)]) {
    joined_[static_cast<std::size_t>(rank)] = true;
    ++joined_count_;
    last_joined_ = rank;
  }
  return ready(e);
}

std::vector<std::string> MessageTable::ready_names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) {
    if (ready(e)) out.push_back(name);
  }
  return out;
}

Response MessageTable::take(const std::string& name) {
  auto it = entries_.find(name);
  if (it == entries_.end() || !ready(it->second)) {
    throw Error("hora engine: internal error: " + quoted_name(name) + " taken before it was ready");
  }
  Entry e = std::move(it->second);
  entries_.erase(it);
  int first = 0;
  while (!e.by_rank[static_cast<std::size_t>(first)].has_value()) ++first;
  const Request& reference = *e.by_rank[static_cast<std::size_t>(first)];
  Response response;
  response.request = reference;
  for (int r = first + 1; r < size_; ++r) {
    const auto& slot = e.by_rank[static_cast<std::size_t>(r)];
    if (!slot.has_value()) continue;  // joined
    std::string diff = difference(reference, first, *slot, r);
    if (!diff.empty()) {
      response.error = std::move(diff);
      response.error_kind = Response::ErrorKind::kMismatch;
      return response;
    }
  }
  if (reference.type == OpType::kJoin) {
    response.request.root = last_joined_;
    joined_.assign(joined_.size(), false);
    joined_count_ = 0;
    last_joined_ = -1;
    return response;
  }
  if (joined_count_ > 0 && reference.type != OpType::kAllreduce) {
    // Horovod's controller refuses these too: a joined rank has no tensor to send or receive.
    response.error = std::string(name_of(reference.type)) + " " + quoted_name(name) +
                     " is not supported while a rank has joined (hora.join()): only allreduce "
                     "runs alongside a join, with zeros from the joined ranks";
    response.error_kind = Response::ErrorKind::kMismatch;
    return response;
  }
  if (response.request.type == OpType::kAllgather) {
    response.rank_counts.reserve(e.by_rank.size());
    for (const auto& r : e.by_rank) response.rank_counts.push_back(r ? r->count : 0);
  }
  return response;
}

MessageTable::Pending MessageTable::describe(const std::string& name, const Entry& e) const {
  Pending p;
  p.name = name;
  p.first_seen = e.first_seen;
  for (int r = 0; r < size_; ++r) {
    const auto& slot = e.by_rank[static_cast<std::size_t>(r)];
    if (slot.has_value()) {
      p.type = slot->type;
      p.submitted.push_back(r);
    } else if (!joined_[static_cast<std::size_t>(r)]) {
      p.missing.push_back(r);
    }
  }
  return p;
}

std::optional<MessageTable::Pending> MessageTable::erase(const std::string& name) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  Pending p = describe(name, it->second);
  entries_.erase(it);
  return p;
}

std::vector<MessageTable::Pending> MessageTable::pending_since(Clock::time_point cutoff) const {
  std::vector<Pending> out;
  for (const auto& [name, e] : entries_) {
    if (e.first_seen <= cutoff) out.push_back(describe(name, e));
  }
  return out;
}

}  // namespace hora::detail::engine
