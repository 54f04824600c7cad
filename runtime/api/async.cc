// The public async API (<hora/async.h>), its submitting half: builds a Handle::State per call
// and hands it to the process's Engine (runtime/process/process.h), held by shared_ptr for the
// submission. What one does with a Handle (poll, synchronize, ...) is runtime/engine/handle.cc.
#include <hora/async.h>

#include "runtime/engine/engine.h"
#include "runtime/engine/op_state.h"
#include "runtime/process/process.h"

namespace hora {
namespace {

using detail::engine::Engine;

Handle submit(std::shared_ptr<Handle::State> s) {
  std::shared_ptr<Engine> engine = detail::Process::instance().engine();
  if (!engine) {
    throw UsageError(std::string("hora::") + detail::engine::name_of(s->request.type) + "_async('" +
                     s->request.name + "'): hora::init() has not been called (or " +
                     "hora::shutdown() already ran); call hora::init() first");
  }
  return engine->submit(std::move(s));
}

}  // namespace

Handle allreduce_async(const std::string& name, const void* sendbuf, void* recvbuf,
                       std::size_t count, DataType type, ReduceOp op, Callback on_done) {
  return submit(detail::engine::make_allreduce_op(name, sendbuf, recvbuf, count, type, op,
                                                  std::move(on_done)));
}

Handle allgather_async(const std::string& name, const void* sendbuf, std::size_t count,
                       DataType type, OutputAllocator output, Callback on_done) {
  return submit(detail::engine::make_allgather_op(name, sendbuf, count, type, std::move(output),
                                                  std::move(on_done)));
}

Handle broadcast_async(const std::string& name, void* buffer, std::size_t count, DataType type,
                       int root, Callback on_done) {
  return submit(
      detail::engine::make_broadcast_op(name, buffer, count, type, root, std::move(on_done)));
}

Handle alltoall_async(const std::string& name, const void* sendbuf,
                      const std::vector<std::size_t>& send_splits, DataType type,
                      OutputAllocator output, Callback on_done) {
  return submit(detail::engine::make_alltoall_op(name, sendbuf, send_splits, type,
                                                 std::move(output), std::move(on_done)));
}

Handle reducescatter_async(const std::string& name, const void* sendbuf, void* recvbuf,
                           std::size_t count, DataType type, ReduceOp op, Callback on_done) {
  return submit(detail::engine::make_reducescatter_op(name, sendbuf, recvbuf, count, type, op,
                                                      std::move(on_done)));
}

}  // namespace hora
