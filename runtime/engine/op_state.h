// Handle::State: one submitted async op as its submitting rank sees it: the buffers, the
// completion callback and the outcome.
//
// Ownership and threading: the submitting call creates it and hands a shared_ptr to the Engine
// (which keeps it until the op completes) and one to the user's Handle. Buffers and the callback
// are written once before submission and then only read by the thread that runs the engine's
// cycle. The outcome (done, error, received_counts) is written once by complete(), under mu_,
// and read by any thread through poll()/wait_until(); received_counts is written before done, so
// readers that saw done may read it without the lock.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <hora/async.h>

#include "common/thread_annotations.h"
#include "runtime/engine/request.h"

namespace hora {

struct Handle::State {
  detail::engine::Request request;  // name, op type, dtype, reduce op, count, root
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;               // allreduce, broadcast (in place), reducescatter
  std::vector<std::size_t> send_splits;  // alltoall
  OutputAllocator output;                // allgather, alltoall
  Callback on_done;
  std::chrono::steady_clock::time_point submitted;
  // Set by the engine at submission: called when a thread starts waiting for this op with a
  // deadline (wait_until()), so the engine thread runs its next cycle now instead of at the next
  // tick.
  std::function<void()> on_wait;
  // Set by the engine at submission: called when a thread starts waiting for this op without a
  // deadline (wait()). It runs the engine's cycles on the waiting thread until the op completes
  // (no hand-off to the engine thread and back), or falls back to on_wait's behaviour where it
  // cannot (Engine::drive()).
  std::function<void()> drive;

  // Filled by the engine before complete() (allgather, alltoall; join: the last rank to join).
  std::vector<std::size_t> received_counts;
  // The zeros a joined rank contributes to the others' allreduce (sendbuf and recvbuf point
  // here; Engine::negotiate builds such a state for an op this rank never submitted).
  std::vector<std::uint8_t> zeros;

  // Records the outcome (first call wins), wakes waiters, then runs on_done on this thread.
  void complete(std::exception_ptr error);
  bool done() const;
  // Waits until done or the deadline passes; returns done().
  bool wait_until(std::chrono::steady_clock::time_point deadline) const;
  void wait() const;
  std::exception_ptr error() const;

 private:
  mutable Mutex mu_;
  mutable CondVar cv_;
  bool done_ HORA_GUARDED_BY(mu_) = false;
  std::exception_ptr error_ HORA_GUARDED_BY(mu_);
};

}  // namespace hora

namespace hora::detail::engine {

// Builders of a not-yet-submitted op (Engine::submit validates and queues it). The public
// functions in <hora/async.h> are these plus Engine::submit on the installed engine.
std::shared_ptr<Handle::State> make_allreduce_op(const std::string& name, const void* sendbuf,
                                                 void* recvbuf, std::size_t count, DataType type,
                                                 ReduceOp op, Callback on_done = nullptr);
std::shared_ptr<Handle::State> make_allgather_op(const std::string& name, const void* sendbuf,
                                                 std::size_t count, DataType type,
                                                 OutputAllocator output,
                                                 Callback on_done = nullptr);
std::shared_ptr<Handle::State> make_broadcast_op(const std::string& name, void* buffer,
                                                 std::size_t count, DataType type, int root,
                                                 Callback on_done = nullptr);
std::shared_ptr<Handle::State> make_alltoall_op(const std::string& name, const void* sendbuf,
                                                const std::vector<std::size_t>& send_splits,
                                                DataType type, OutputAllocator output,
                                                Callback on_done = nullptr);
std::shared_ptr<Handle::State> make_join_op(Callback on_done = nullptr);
std::shared_ptr<Handle::State> make_reducescatter_op(const std::string& name, const void* sendbuf,
                                                     void* recvbuf, std::size_t count,
                                                     DataType type, ReduceOp op,
                                                     Callback on_done = nullptr);

}  // namespace hora::detail::engine
