// Named asynchronous collectives (Horovod's engine).
//
//   std::vector<hora::Handle> handles;
//   for (Layer& l : layers)   // in whatever order the gradients become ready on this rank
//     handles.push_back(hora::allreduce_async("grad/" + l.name, l.grad.data(), l.grad.data(),
//                                             l.grad.size(), hora::DataType::kFloat32,
//                                             hora::ReduceOp::kAverage));
//   for (hora::Handle& h : handles) hora::synchronize(h);
//
// Unlike the blocking collectives in <hora/hora.h>, ranks may submit these in different orders:
// a background thread in each process agrees with the other ranks which names every rank has
// submitted, runs them in one order that is the same everywhere, and fuses small allreduces into
// one buffer (HORA_FUSION_THRESHOLD). An op runs once every rank has submitted its name.
//
// Rules:
//  - Names are unique among this rank's in-flight ops (a duplicate throws hora::UsageError);
//    a name may be reused once its op has completed, which is how a training loop submits the
//    same gradient every step (repeated names are cheap: see HORA_CACHE_CAPACITY).
//  - Every rank submits the same name with the same op, data type, reduce op, root and (except
//    allgather and alltoall) count. A disagreement fails the op on every rank with a
//    hora::MismatchError naming the ranks and the values.
//  - Buffers belong to the engine from submission until the op completes (poll() returns true,
//    synchronize() returns or throws, or the callback runs): do not read, write or free them.
//  - Argument errors (empty name, bad root, wrong number of splits, hora::init() not called)
//    throw hora::UsageError from the submitting call. Everything after that (mismatch, a peer's
//    failure, shutdown, the stall check's HORA_STALL_SHUTDOWN_SECONDS) is reported through the
//    handle: synchronize() rethrows it and the callback receives it.
//  - Callbacks run once, after the output is written, on the thread that runs the engine's
//    cycle: the engine's background thread, or a thread waiting in synchronize(handle) without
//    a timeout, which runs the cycles itself until its op completes (so the callbacks of ops
//    that complete in those cycles run there). They may submit new async ops but must not wait
//    for one (synchronize would deadlock the engine).
//  - Scope: async ops run over all ranks (Scope::kGlobal).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <hora/error.h>
#include <hora/types.h>

namespace hora {

// A ticket for one submitted op. Cheap to copy; copies refer to the same op. A default-constructed
// Handle is empty (valid() is false); the functions below throw hora::UsageError for it.
class Handle {
 public:
  struct State;  // defined inside libhora

  Handle() = default;
  explicit Handle(std::shared_ptr<State> state) noexcept : state_(std::move(state)) {}

  bool valid() const noexcept { return state_ != nullptr; }
  const std::string& name() const;  // the name it was submitted under
  const std::shared_ptr<State>& state() const noexcept { return state_; }

 private:
  std::shared_ptr<State> state_;
};

// Receives nullptr on success, else the op's error (a hora::Error subclass).
using Callback = std::function<void(std::exception_ptr error)>;

// For ops whose output size is known only after negotiation (allgather, alltoall): called once on
// the engine thread with the number of elements to receive; returns where to write them (room for
// `count` elements of the op's data type). An exception thrown here fails the op.
using OutputAllocator = std::function<void*(std::size_t count)>;

// Element-wise reduction of `count` elements over all ranks into recvbuf (sendbuf == recvbuf: in
// place). kAverage divides the sum by size() (integers: truncating division).
Handle allreduce_async(const std::string& name, const void* sendbuf, void* recvbuf,
                       std::size_t count, DataType type, ReduceOp op, Callback on_done = nullptr,
                       ProcessSet set = kGlobalProcessSet);

// Each rank contributes `count` elements (counts may differ per rank). The output receives the
// concatenation in rank order; received_counts(handle)[i] is rank i's count.
Handle allgather_async(const std::string& name, const void* sendbuf, std::size_t count,
                       DataType type, OutputAllocator output, Callback on_done = nullptr,
                       ProcessSet set = kGlobalProcessSet);

// root's `count` elements are copied into buffer on every rank.
Handle broadcast_async(const std::string& name, void* buffer, std::size_t count, DataType type,
                       int root, Callback on_done = nullptr, ProcessSet set = kGlobalProcessSet);

// send_splits[i] elements (consecutive in sendbuf) go to rank i; send_splits.size() == size().
// The output receives what every rank sent to this one, in rank order;
// received_counts(handle)[i] is the number of elements from rank i.
Handle alltoall_async(const std::string& name, const void* sendbuf,
                      const std::vector<std::size_t>& send_splits, DataType type,
                      OutputAllocator output, Callback on_done = nullptr,
                      ProcessSet set = kGlobalProcessSet);

// Reduces `count` elements over all ranks; recvbuf receives this rank's block of
// hora::reducescatter_count(count, rank(), size()) elements.
Handle reducescatter_async(const std::string& name, const void* sendbuf, void* recvbuf,
                           std::size_t count, DataType type, ReduceOp op,
                           Callback on_done = nullptr, ProcessSet set = kGlobalProcessSet);

// Horovod's join: this rank has no more ops (uneven data: its epoch ended early). Until every
// rank has joined, the other ranks' allreduces run without it, and it contributes zeros to them
// (AVERAGE still divides by size()); an allgather, broadcast, alltoall or reducescatter while a
// rank has joined fails with hora::MismatchError, as in Horovod. Completes when every rank has
// joined; received_counts(handle)[0] is then the last rank to join, the same on every rank.
// Synchronize every op of this rank before joining.
Handle join_async(Callback on_done = nullptr);
// join_async, synchronized: returns the last rank to join.
int join();

// The shaped forms: the same ops on a tensor of `shape` (count = the product of its dimensions;
// alltoall's splits count elements). Every rank's shape is checked against the others' by
// Horovod's rules, and a difference fails the op on every rank with hora::MismatchError naming
// the ranks and shapes: allgather and alltoall need the same number of dimensions and the same
// dimensions after the first, every other op the same shape (docs/errors.md, "Shape rules").
using Shape = std::vector<std::int64_t>;
Handle allreduce_async(const std::string& name, const void* sendbuf, void* recvbuf,
                       const Shape& shape, DataType type, ReduceOp op, Callback on_done = nullptr,
                       ProcessSet set = kGlobalProcessSet);
Handle allgather_async(const std::string& name, const void* sendbuf, const Shape& shape,
                       DataType type, OutputAllocator output, Callback on_done = nullptr,
                       ProcessSet set = kGlobalProcessSet);
Handle broadcast_async(const std::string& name, void* buffer, const Shape& shape, DataType type,
                       int root, Callback on_done = nullptr, ProcessSet set = kGlobalProcessSet);
Handle alltoall_async(const std::string& name, const void* sendbuf, const Shape& shape,
                      const std::vector<std::size_t>& send_splits, DataType type,
                      OutputAllocator output, Callback on_done = nullptr,
                      ProcessSet set = kGlobalProcessSet);
Handle reducescatter_async(const std::string& name, const void* sendbuf, void* recvbuf,
                           const Shape& shape, DataType type, ReduceOp op,
                           Callback on_done = nullptr, ProcessSet set = kGlobalProcessSet);

// `set`: the process set the op runs on (<hora/process_set.h>; only its members may submit). Its
// own engine negotiates and fuses the set's ops; ranks, roots, splits and kAverage's divisor
// are the set's, as in the blocking API.

// True once the op has completed, successfully or not. Never throws the op's error.
bool poll(const Handle& handle);

// Waits for the op; rethrows its error (the same hora::Error subclass). There is no deadline:
// an op some rank never submits waits until HORA_STALL_SHUTDOWN_SECONDS (if set) fails it, while
// the stall check names the missing ranks every HORA_STALL_CHECK_SECONDS.
void synchronize(const Handle& handle);

// Same, but throws hora::TimeoutError if the op has not completed within `timeout` (the op stays
// in flight; synchronize it again later).
void synchronize(const Handle& handle, std::chrono::milliseconds timeout);

// After completion: allgather: the count of every rank; alltoall: the elements received from
// every rank; other ops: empty. Throws hora::UsageError before completion.
const std::vector<std::size_t>& received_counts(const Handle& handle);

// Horovod's hvd.start_timeline / stop_timeline: a Chrome trace (chrome://tracing, Perfetto) of
// the async ops from now on, written by rank 0 (the ops run in the same order everywhere), in
// the format of HORA_TIMELINE. mark_cycles adds a CYCLE_START marker per busy engine cycle. As in
// Horovod: only rank 0's call matters (on other ranks both return at once, so calling them on
// every rank is fine); start while a timeline is open switches to `path` (the old file is closed
// complete), or with the same path only changes mark_cycles; stop without a timeline does
// nothing. stop_timeline returns once the file is closed and valid JSON; shutdown closes it too.
// Both wait for the engine's current cycle. Throw hora::UsageError before hora::init() (or after
// hora::shutdown()); start throws hora::Error naming the path when rank 0 cannot create it.
void start_timeline(const std::string& path, bool mark_cycles = false);
void stop_timeline();

// --- Typed conveniences. The vectors must outlive the op. ---

template <typename T>
Handle allreduce_async(const std::string& name, std::vector<T>& data, ReduceOp op,
                       Callback on_done = nullptr) {
  return allreduce_async(name, data.data(), data.data(), data.size(), dtype_of<T>(), op,
                         std::move(on_done));
}

template <typename T>
Handle allgather_async(const std::string& name, const std::vector<T>& input, std::vector<T>* output,
                       Callback on_done = nullptr) {
  return allgather_async(
      name, input.data(), input.size(), dtype_of<T>(),
      [output](std::size_t count) -> void* {
        output->resize(count);
        return output->data();
      },
      std::move(on_done));
}

template <typename T>
Handle broadcast_async(const std::string& name, std::vector<T>& data, int root,
                       Callback on_done = nullptr) {
  return broadcast_async(name, data.data(), data.size(), dtype_of<T>(), root, std::move(on_done));
}

template <typename T>
Handle alltoall_async(const std::string& name, const std::vector<T>& input,
                      const std::vector<std::size_t>& send_splits, std::vector<T>* output,
                      Callback on_done = nullptr) {
  return alltoall_async(
      name, input.data(), send_splits, dtype_of<T>(),
      [output](std::size_t count) -> void* {
        output->resize(count);
        return output->data();
      },
      std::move(on_done));
}

}  // namespace hora
