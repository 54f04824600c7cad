// Stands in for backend.cc and cuda_api.cc when libhora is built without NCCL, so the runtime
// and programs link the same symbols either way. Nothing here can reach a GPU: queries answer
// "no", and everything that would need NCCL throws UsageError saying how to get it.
#include <hora/cuda.h>

#include <fmt/format.h>

#include "runtime/nccl/backend.h"

namespace hora {

namespace {

[[noreturn]] void not_built(const char* what) {
  throw UsageError(fmt::format("{}: hora was built without NCCL (rebuild with -Dnccl=enabled on a "
                               "machine with CUDA and NCCL)",
                               what));
}

}  // namespace

namespace detail::nccl {

bool compiled() { return false; }
bool gpu_available() { return false; }
PointerInfo pointer_info(const void*) { return {}; }
bool is_device_pointer(const void*) { return false; }

// Holds nothing: every operation of a backend without NCCL fails the same way.
struct Backend::Impl {};

Backend::Backend(const WorldInfo&, rdv::Client&, std::chrono::milliseconds)
    : impl_(std::make_unique<Impl>()) {}
Backend::Backend(const WorldInfo&, std::chrono::milliseconds)
    : impl_(std::make_unique<Impl>()) {}
Backend::~Backend() = default;

void Backend::allreduce(const void*, void*, std::size_t, DataType, ReduceOp, Scope, void*) {
  not_built("GPU allreduce");
}
void Backend::allgather(const void*, std::size_t, void*, const std::vector<std::size_t>&,
                        DataType, Scope, void*) {
  not_built("GPU allgather");
}
void Backend::broadcast(void*, std::size_t, DataType, int, Scope, void*) {
  not_built("GPU broadcast");
}
void Backend::alltoall(const void*, const std::vector<std::size_t>&, void*,
                       const std::vector<std::size_t>&, DataType, Scope, void*) {
  not_built("GPU alltoall");
}
void Backend::reducescatter(const void*, std::size_t, void*, DataType, ReduceOp, Scope, void*) {
  not_built("GPU reducescatter");
}
void Backend::barrier(Scope, void*) { not_built("GPU barrier"); }
void Backend::abort(const std::string&) {}  // no communicators to abort
int Backend::device() { not_built("hora::cuda_device()"); }

}  // namespace detail::nccl

bool cuda_built() { return false; }
bool gpu_available() { return false; }
int cuda_device() { not_built("hora::cuda_device()"); }

void allreduce(const void*, void*, std::size_t, DataType, ReduceOp, void*, Scope) {
  not_built("hora::allreduce with a CUDA stream");
}
void allgather(const void*, std::size_t, void*, const std::vector<std::size_t>&, DataType, void*,
               Scope) {
  not_built("hora::allgather with a CUDA stream");
}
void broadcast(void*, std::size_t, DataType, int, void*, Scope) {
  not_built("hora::broadcast with a CUDA stream");
}
void alltoall(const void*, const std::vector<std::size_t>&, void*,
              const std::vector<std::size_t>&, DataType, void*, Scope) {
  not_built("hora::alltoall with a CUDA stream");
}
void reducescatter(const void*, std::size_t, void*, DataType, ReduceOp, void*, Scope) {
  not_built("hora::reducescatter with a CUDA stream");
}
void barrier(void*, Scope) { not_built("hora::barrier with a CUDA stream"); }

}  // namespace hora
