// The public async API (<hora/async.h>): builds a Handle::State per call and hands it to the
// Engine installed by the runtime (global_engine.h).
#include <hora/async.h>

#include "runtime/engine/engine.h"
#include "runtime/engine/global_engine.h"
#include "runtime/engine/op_state.h"

namespace hora {
namespace {

using detail::engine::Engine;

Handle submit(std::shared_ptr<Handle::State> s) {
  std::shared_ptr<Engine> engine = detail::engine::installed_engine();
  if (!engine) {
    throw UsageError(std::string("hora::") + detail::engine::name_of(s->request.type) + "_async('" +
                     s->request.name + "'): hora::init() has not been called (or " +
                     "hora::shutdown() already ran); call hora::init() first");
  }
  return engine->submit(std::move(s));
}

const Handle::State& checked(const Handle& handle, const char* fn) {
  if (!handle.valid()) {
    throw UsageError(std::string("hora::") + fn + ": the handle is empty (default-constructed)");
  }
  return *handle.state();
}

}  // namespace

const std::string& Handle::name() const { return checked(*this, "Handle::name").request.name; }

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
  return submit(detail::engine::make_broadcast_op(name, buffer, count, type, root,
                                                  std::move(on_done)));
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

bool poll(const Handle& handle) { return checked(handle, "poll").done(); }

void synchronize(const Handle& handle) {
  const Handle::State& s = checked(handle, "synchronize");
  s.wait();
  if (std::exception_ptr e = s.error()) std::rethrow_exception(e);
}

void synchronize(const Handle& handle, std::chrono::milliseconds timeout) {
  const Handle::State& s = checked(handle, "synchronize");
  if (!s.wait_until(std::chrono::steady_clock::now() + timeout)) {
    throw TimeoutError("hora::synchronize: " + std::string(detail::engine::name_of(s.request.type)) +
                       " '" + s.request.name + "' did not complete within " +
                       std::to_string(timeout.count()) +
                       " ms; it is still in flight (some rank may not have submitted it yet: "
                       "the stall check names missing ranks after HORA_STALL_CHECK_SECONDS)");
  }
  if (std::exception_ptr e = s.error()) std::rethrow_exception(e);
}

const std::vector<std::size_t>& received_counts(const Handle& handle) {
  const Handle::State& s = checked(handle, "received_counts");
  if (!s.done()) {
    throw UsageError("hora::received_counts('" + s.request.name +
                     "'): the op has not completed yet; synchronize it first");
  }
  return s.received_counts;
}

}  // namespace hora
