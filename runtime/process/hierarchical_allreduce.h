// The global allreduce across hosts in three stages (docs/shm.md): a reducescatter over this
// host's shared memory, an allreduce of this rank's slice over its cross group (Gloo: local
// rank i of every host), and an allgather over shared memory. The Runtime uses it for host
// buffers of the global scope when shared memory is on and every host holds the same number of
// ranks (agreed at init), by default or when HORA_HIERARCHICAL_ALLREDUCE=1.
#pragma once

#include <hora/types.h>

#include <cstddef>

namespace hora::detail {

namespace gloo {
class GlooBackend;
}
namespace shm {
class ShmGroup;
}

// In place on `buffer`; kAverage is reduced as kSum (the caller divides by the world size).
void hierarchical_allreduce(shm::ShmGroup& local, gloo::GlooBackend& cross, int cross_size,
                            void* buffer, std::size_t count, DataType type, ReduceOp op);

}  // namespace hora::detail
