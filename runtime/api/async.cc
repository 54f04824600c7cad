// The public async API (<hora/async.h>), its submitting half: builds a Handle::State per call
// and hands it to the process's Engine (runtime/process/process.h), held by shared_ptr for the
// submission (or the timeline call). What one does with a Handle (poll, synchronize, ...) is
// runtime/engine/handle.cc.
#include <hora/async.h>

#include "runtime/engine/engine.h"
#include "runtime/engine/op_state.h"
#include "runtime/process/process.h"

namespace hora {
namespace {

using detail::engine::Engine;

Handle submit(std::shared_ptr<Handle::State> s, ProcessSet set) {
  std::shared_ptr<Engine> engine =
      set.id == 0 ? detail::Process::instance().engine()
                  : detail::Process::instance().engine(std::string(detail::engine::name_of(
                                                           s->request.type)) +
                                                           "_async('" + s->request.name + "')",
                                                       set.id);
  if (!engine) {
    throw UsageError(std::string("hora::") + detail::engine::name_of(s->request.type) + "_async('" +
                     s->request.name + "'): hora::init() has not been called (or " +
                     "hora::shutdown() already ran); call hora::init() first");
  }
  return engine->submit(std::move(s));
}

// The element count of `shape` (the shaped forms), refusing what the negotiation cannot carry.
std::size_t elements(const char* what, const std::string& name, const Shape& shape) {
  auto refuse = [&](const std::string& why) {
    return UsageError(std::string("hora::") + what + "_async('" + name + "'): " + why);
  };
  if (shape.size() > 255) throw refuse(std::to_string(shape.size()) + " dimensions (at most 255)");
  std::size_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw refuse("negative dimension " + std::to_string(d) + " in its shape");
    if (__builtin_mul_overflow(n, static_cast<std::size_t>(d), &n)) {
      throw refuse("its shape's element count overflows");
    }
  }
  return n;
}

Handle submit_shaped(std::shared_ptr<Handle::State> s, const Shape& shape, ProcessSet set) {
  s->request.shape = shape;
  return submit(std::move(s), set);
}

std::shared_ptr<Engine> engine_for(const std::string& call) {
  std::shared_ptr<Engine> engine = detail::Process::instance().engine();
  if (!engine) {
    throw UsageError("hora::" + call + ": hora::init() has not been called (or " +
                     "hora::shutdown() already ran); call hora::init() first");
  }
  return engine;
}

}  // namespace

void start_timeline(const std::string& path, bool mark_cycles) {
  const std::string call = "start_timeline('" + path + "')";
  if (path.empty()) throw UsageError("hora::" + call + ": the path is empty");
  engine_for(call)->start_timeline(path, mark_cycles);
}

void stop_timeline() { engine_for("stop_timeline()")->stop_timeline(); }

Handle allreduce_async(const std::string& name, const void* sendbuf, void* recvbuf,
                       std::size_t count, DataType type, ReduceOp op, Callback on_done,
                       ProcessSet set) {
  return submit(detail::engine::make_allreduce_op(name, sendbuf, recvbuf, count, type, op,
                                                  std::move(on_done)),
                set);
}

Handle allgather_async(const std::string& name, const void* sendbuf, std::size_t count,
                       DataType type, OutputAllocator output, Callback on_done, ProcessSet set) {
  return submit(detail::engine::make_allgather_op(name, sendbuf, count, type, std::move(output),
                                                  std::move(on_done)),
                set);
}

Handle broadcast_async(const std::string& name, void* buffer, std::size_t count, DataType type,
                       int root, Callback on_done, ProcessSet set) {
  return submit(detail::engine::make_broadcast_op(name, buffer, count, type, root,
                                                  std::move(on_done)),
                set);
}

Handle alltoall_async(const std::string& name, const void* sendbuf,
                      const std::vector<std::size_t>& send_splits, DataType type,
                      OutputAllocator output, Callback on_done, ProcessSet set) {
  return submit(detail::engine::make_alltoall_op(name, sendbuf, send_splits, type,
                                                 std::move(output), std::move(on_done)),
                set);
}

Handle reducescatter_async(const std::string& name, const void* sendbuf, void* recvbuf,
                           std::size_t count, DataType type, ReduceOp op, Callback on_done,
                           ProcessSet set) {
  return submit(detail::engine::make_reducescatter_op(name, sendbuf, recvbuf, count, type, op,
                                                      std::move(on_done)),
                set);
}

Handle join_async(Callback on_done) {
  return submit(detail::engine::make_join_op(std::move(on_done)), kGlobalProcessSet);
}

int join() {
  Handle handle = join_async();
  synchronize(handle);
  return static_cast<int>(received_counts(handle).at(0));
}

Handle allreduce_async(const std::string& name, const void* sendbuf, void* recvbuf,
                       const Shape& shape, DataType type, ReduceOp op, Callback on_done,
                       ProcessSet set) {
  const std::size_t n = elements("allreduce", name, shape);
  return submit_shaped(detail::engine::make_allreduce_op(name, sendbuf, recvbuf, n, type, op,
                                                         std::move(on_done)),
                       shape, set);
}

Handle allgather_async(const std::string& name, const void* sendbuf, const Shape& shape,
                       DataType type, OutputAllocator output, Callback on_done, ProcessSet set) {
  const std::size_t n = elements("allgather", name, shape);
  return submit_shaped(detail::engine::make_allgather_op(name, sendbuf, n, type, std::move(output),
                                                         std::move(on_done)),
                       shape, set);
}

Handle broadcast_async(const std::string& name, void* buffer, const Shape& shape, DataType type,
                       int root, Callback on_done, ProcessSet set) {
  const std::size_t n = elements("broadcast", name, shape);
  return submit_shaped(detail::engine::make_broadcast_op(name, buffer, n, type, root,
                                                         std::move(on_done)),
                       shape, set);
}

Handle alltoall_async(const std::string& name, const void* sendbuf, const Shape& shape,
                      const std::vector<std::size_t>& send_splits, DataType type,
                      OutputAllocator output, Callback on_done, ProcessSet set) {
  const std::size_t n = elements("alltoall", name, shape);
  auto state = detail::engine::make_alltoall_op(name, sendbuf, send_splits, type, std::move(output),
                                                std::move(on_done));
  if (state->request.count != n) {
    throw UsageError("hora::alltoall_async('" + name + "'): send_splits add up to " +
                     std::to_string(state->request.count) + " elements but the shape holds " +
                     std::to_string(n));
  }
  return submit_shaped(std::move(state), shape, set);
}

Handle reducescatter_async(const std::string& name, const void* sendbuf, void* recvbuf,
                           const Shape& shape, DataType type, ReduceOp op, Callback on_done,
                           ProcessSet set) {
  const std::size_t n = elements("reducescatter", name, shape);
  return submit_shaped(detail::engine::make_reducescatter_op(name, sendbuf, recvbuf, n, type, op,
                                                             std::move(on_done)),
                       shape, set);
}

}  // namespace hora
