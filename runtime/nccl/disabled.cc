// Stands in for backend.cc and stream.cc when libhora is built without NCCL, so the runtime
// links the same symbols either way. Nothing here can reach a GPU: queries answer "no", and
// everything that would need NCCL throws UsageError saying how to get it. (The stream overloads
// of <hora/cuda.h> check nccl::compiled() first: runtime/api/cuda.cc.)

#include "runtime/nccl/backend.h"

namespace hora {

namespace detail::nccl {

bool compiled() { return false; }
int version() { return 0; }
bool gpu_available() { return false; }
PointerInfo pointer_info(const void*) { return {}; }
bool is_device_pointer(const void*) { return false; }
std::string synchronize_stream(void*) { return {}; }

// Holds nothing: every operation of a backend without NCCL fails the same way.
struct Backend::Impl {};

Backend::Backend(const WorldInfo&, rdv::Client&, std::chrono::milliseconds)
    : impl_(std::make_unique<Impl>()) {}
Backend::Backend(const WorldInfo&, std::chrono::milliseconds) : impl_(std::make_unique<Impl>()) {}
Backend::~Backend() = default;

void Backend::allreduce(const void*, void*, std::size_t, DataType, ReduceOp, Scope, void*) {
  throw_not_built("GPU allreduce");
}
void Backend::allgather(const void*, std::size_t, void*, const std::vector<std::size_t>&, DataType,
                        Scope, void*) {
  throw_not_built("GPU allgather");
}
void Backend::broadcast(void*, std::size_t, DataType, int, Scope, void*) {
  throw_not_built("GPU broadcast");
}
void Backend::alltoall(const void*, const std::vector<std::size_t>&, void*,
                       const std::vector<std::size_t>&, DataType, Scope, void*) {
  throw_not_built("GPU alltoall");
}
void Backend::reducescatter(const void*, std::size_t, void*, DataType, ReduceOp, Scope, void*) {
  throw_not_built("GPU reducescatter");
}
void Backend::barrier(Scope, void*) { throw_not_built("GPU barrier"); }
void Backend::abort(const std::string&) {}  // no communicators to abort
int Backend::device() { throw_not_built("hora::cuda_device()"); }

}  // namespace detail::nccl

}  // namespace hora
