#include "runtime/engine/request.h"

namespace hora::detail::engine {

const char* name_of(OpType type) {
  switch (type) {
    case OpType::kAllreduce: return "allreduce";
    case OpType::kAllgather: return "allgather";
    case OpType::kBroadcast: return "broadcast";
    case OpType::kAlltoall: return "alltoall";
    case OpType::kReducescatter: return "reducescatter";
    case OpType::kJoin: return "join";
  }
  return "unknown-op";
}

const char* upper_name_of(OpType type) {
  switch (type) {
    case OpType::kAllreduce: return "ALLREDUCE";
    case OpType::kAllgather: return "ALLGATHER";
    case OpType::kBroadcast: return "BROADCAST";
    case OpType::kAlltoall: return "ALLTOALL";
    case OpType::kReducescatter: return "REDUCESCATTER";
    case OpType::kJoin: return "JOIN";
  }
  return "UNKNOWN";
}

bool Request::count_must_match() const {
  return type == OpType::kAllreduce || type == OpType::kBroadcast || type == OpType::kReducescatter;
}

bool Request::has_reduce_op() const {
  return type == OpType::kAllreduce || type == OpType::kReducescatter;
}

}  // namespace hora::detail::engine
