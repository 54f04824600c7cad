// What one rank asks the engine to do for one named tensor: the part of an async op that every
// rank must agree on. Buffers are not here (they stay in the op's Handle::State on the submitting
// rank); a Request travels between ranks in a NegotiationMessage and is kept in a Response.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <hora/types.h>

namespace hora::detail::engine {

enum class OpType : std::uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  // hora::join: this rank has no more ops this epoch. Until every rank has joined, the others'
  // allreduces run without waiting for it (it contributes zeros); its Response's root is the
  // last rank to join.
  kJoin = 5,
};
inline constexpr std::uint8_t kOpTypeCount = 6;

// The reserved name of the join op (users' names cannot start with "__hora").
inline constexpr const char* kJoinName = "__hora_join__";

const char* name_of(OpType type);        // "allreduce", "allgather", ...
const char* upper_name_of(OpType type);  // "ALLREDUCE", ... (timeline activity names)

// Host memory. A GPU backend would put its device ordinal here; fusion never mixes devices.
inline constexpr std::int32_t kCpuDevice = -1;

struct Request {
  std::string name;
  OpType type = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // allreduce, reducescatter
  // Elements: allreduce, broadcast, reducescatter (must agree across ranks); allgather: this
  // rank's contribution (may differ); alltoall: total elements sent (informational).
  std::uint64_t count = 0;
  std::int32_t root = 0;  // broadcast
  std::int32_t device = kCpuDevice;
  // The tensor's shape when the caller gave one (the shaped API forms, hora.torch); empty for the
  // flat C++ forms, whose ranks are checked on counts alone. Checked by Horovod's rules
  // (message_table.cc): equal on every rank, except the first dimension of allgather/alltoall.
  std::vector<std::int64_t> shape;

  // Whether counts must be equal on every rank for this op type.
  bool count_must_match() const;
  // Whether `op` is meaningful for this op type.
  bool has_reduce_op() const;
  bool operator==(const Request&) const = default;
};

}  // namespace hora::detail::engine
