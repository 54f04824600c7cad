#include "runtime/engine/op_state.h"

namespace hora {

void Handle::State::complete(std::exception_ptr error) {
  {
    Lock lock(mu_);
    if (done_) return;
    done_ = true;
    error_ = error;
  }
  cv_.notify_all();
  if (on_done) {
    // A throwing callback must not take down the engine thread: its exception has nowhere to
    // go (the op already completed), so it is dropped deliberately.
    try {
      on_done(error);
    } catch (...) {
    }
  }
}

bool Handle::State::done() const {
  Lock lock(mu_);
  return done_;
}

bool Handle::State::wait_until(std::chrono::steady_clock::time_point deadline) const {
  if (on_wait && !done()) on_wait();
  Lock lock(mu_);
  while (!done_ && cv_.wait_until(mu_, deadline)) {
  }
  return done_;
}

void Handle::State::wait() const {
  if (!done()) {
    if (drive) {
      drive();
    } else if (on_wait) {
      on_wait();
    }
  }
  Lock lock(mu_);
  while (!done_) cv_.wait(mu_);
}

std::exception_ptr Handle::State::error() const {
  Lock lock(mu_);
  return error_;
}

}  // namespace hora

namespace hora::detail::engine {
namespace {

std::shared_ptr<Handle::State> new_state(const std::string& name, OpType type, DataType dtype,
                                         std::size_t count, Callback on_done) {
  auto s = std::make_shared<Handle::State>();
  s->request.name = name;
  s->request.type = type;
  s->request.dtype = dtype;
  s->request.count = count;
  s->on_done = std::move(on_done);
  return s;
}

}  // namespace

std::shared_ptr<Handle::State> make_allreduce_op(const std::string& name, const void* sendbuf,
                                                 void* recvbuf, std::size_t count, DataType type,
                                                 ReduceOp op, Callback on_done) {
  auto s = new_state(name, OpType::kAllreduce, type, count, std::move(on_done));
  s->request.op = op;
  s->sendbuf = sendbuf;
  s->recvbuf = recvbuf;
  return s;
}

std::shared_ptr<Handle::State> make_allgather_op(const std::string& name, const void* sendbuf,
                                                 std::size_t count, DataType type,
                                                 OutputAllocator output, Callback on_done) {
  auto s = new_state(name, OpType::kAllgather, type, count, std::move(on_done));
  s->sendbuf = sendbuf;
  s->output = std::move(output);
  return s;
}

std::shared_ptr<Handle::State> make_broadcast_op(const std::string& name, void* buffer,
                                                 std::size_t count, DataType type, int root,
                                                 Callback on_done) {
  auto s = new_state(name, OpType::kBroadcast, type, count, std::move(on_done));
  s->request.root = root;
  s->sendbuf = buffer;
  s->recvbuf = buffer;
  return s;
}

std::shared_ptr<Handle::State> make_alltoall_op(const std::string& name, const void* sendbuf,
                                                const std::vector<std::size_t>& send_splits,
                                                DataType type, OutputAllocator output,
                                                Callback on_done) {
  std::size_t total = 0;
  for (std::size_t c : send_splits) {
    if (__builtin_add_overflow(total, c, &total)) {
      std::string list;
      for (std::size_t x : send_splits) list += (list.empty() ? "" : ", ") + std::to_string(x);
      throw UsageError("hora::alltoall_async('" + name + "'): send_splits [" + list +
                       "] add up to more elements than fit in 64 bits; each split is the "
                       "number of elements sent to that rank");
    }
  }
  auto s = new_state(name, OpType::kAlltoall, type, total, std::move(on_done));
  s->sendbuf = sendbuf;
  s->send_splits = send_splits;
  s->output = std::move(output);
  return s;
}

std::shared_ptr<Handle::State> make_reducescatter_op(const std::string& name, const void* sendbuf,
                                                     void* recvbuf, std::size_t count,
                                                     DataType type, ReduceOp op, Callback on_done) {
  auto s = new_state(name, OpType::kReducescatter, type, count, std::move(on_done));
  s->request.op = op;
  s->sendbuf = sendbuf;
  s->recvbuf = recvbuf;
  return s;
}

std::shared_ptr<Handle::State> make_join_op(Callback on_done) {
  return new_state(kJoinName, OpType::kJoin, DataType::kUInt8, 0, std::move(on_done));
}

}  // namespace hora::detail::engine
