#include "runtime/process/hierarchical_allreduce.h"

#include "runtime/core/blocks.h"
#include "runtime/gloo/gloo_backend.h"
#include "runtime/shm/shm_backend.h"
#include "runtime/shm/shm_group.h"

namespace hora::detail {

void hierarchical_allreduce(shm::ShmGroup& local, gloo::GlooBackend& cross, int cross_size,
                            void* buffer, std::size_t count, DataType type, ReduceOp op) {
  const int me = local.rank();
  const auto blocks = block_counts(count, local.size());
  std::size_t offset = 0;
  for (int i = 0; i < me; ++i) offset += blocks[i];
  char* slice = static_cast<char*>(buffer) + offset * size_of(type);
  local.reducescatter(buffer, slice, blocks, type, op, "global");
  if (blocks[me] > 0 && cross_size > 1) {
    cross.allreduce(slice, blocks[me], type, op, gloo::Group::kCross);
  }
  local.allgather(slice, blocks[me], buffer, blocks, type, "global");
}

}  // namespace hora::detail
