// hora's GPU backend: NCCL communicators formed through the hora rendezvous (no MPI).
//
// Internal to libhora. The Runtime (runtime/process/runtime.h) owns the rendezvous client, the
// world and this backend: it makes one Backend when it joins the job, routes every collective
// whose buffers are GPU memory here (from <hora/hora.h> on the default stream, or from the
// stream overloads of <hora/cuda.h>), forwards the launcher's abort to abort(), and drops the
// backend in shutdown() before the rendezvous connection closes.
//
// Communicators. One per scope, made lazily on the first GPU collective of that scope:
//   global: every rank (rank, size)                        key nccl/global/0/uid
//   local:  ranks of one host (local_rank, local_size)     key nccl/local/<host_index>/uid
//   cross:  ranks with one local_rank (cross_rank, cross_size)  key nccl/cross/<local_rank>/uid
// Rank 0 of the communicator calls ncclGetUniqueId and publishes the 128 bytes with
// client.set(key); the others client.get(key) with the backend's deadline (see unique_id.h).
// Every rank then selects its GPU (select_device) and calls ncclCommInitRankConfig with
// config.blocking = 0, polling ncclCommGetAsyncError until the communicator is ready, an error is
// reported, the deadline passes or abort() is called.
//
// Waiting. Every collective is enqueued on the caller's stream (null: the legacy default stream)
// and then waited for on the host: an event recorded after the NCCL call is polled together with
// ncclCommGetAsyncError, so a dead peer ends in ncclCommAbort and PeerFailure / TimeoutError
// instead of a hang. After an abort or failure the communicator of that scope is gone for good:
// later collectives on it throw again (NCCL communicators cannot be repaired; the job must end).
//
// Threading. Collectives may be called from any thread but run one at a time (a mutex). abort()
// may be called from any thread, including the rendezvous client's reader thread while a
// collective is waiting: it only raises a flag (it never blocks). The waiting thread sees the
// flag within about a millisecond and aborts the communicators; idle ones are aborted by the
// next collective, which throws AbortedError, or by the destructor.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <hora/error.h>
#include <hora/types.h>

#include "runtime/core/backend.h"
#include "runtime/core/world.h"

namespace hora::rdv {
class Client;
}

namespace hora::detail::nccl {

// True when libhora was built with NCCL (-Dnccl=enabled, or auto with CUDA and NCCL found).
bool compiled();

// NCCL's version code (ncclGetVersion of the NCCL libhora runs with, e.g. 21803 for 2.18.3), or 0
// without NCCL.
int version();

// Throws UsageError "<what>: hora was built without NCCL (rebuild with -Dnccl=enabled ...)".
[[noreturn]] void throw_not_built(const char* what);

// True when CUDA reports at least one device this process can use. Cached after the first call.
// False without NCCL, without a driver or without a GPU; never throws.
bool gpu_available();

// True when p is device (or managed) memory according to cudaPointerGetAttributes. False for
// host memory (pageable or pinned), for nullptr, without a GPU and without NCCL. Any CUDA error
// the query raises is cleared so it cannot surface in the caller's later CUDA calls. Never
// creates a CUDA context: while no context exists in the process (a CPU-only job on a GPU
// host), every pointer is host memory and CUDA is not asked.
bool is_device_pointer(const void* p);

// Where a buffer lives, for routing and for a clear error when it is on another rank's GPU.
struct PointerInfo {
  bool on_device = false;  // device or managed memory (what NCCL can use)
  bool managed = false;    // managed (unified) memory: usable from any device
  int device = -1;         // the CUDA ordinal of device memory; -1 for host memory
};
PointerInfo pointer_info(const void* p);  // same rules and error clearing as is_device_pointer

// The CUDA device a rank uses. Pure: no CUDA calls.
//   hora_cuda_device_env == nullptr or "": device local_rank.
//   "N": device N for this rank (whatever its local rank).
//   "A,B,C": one device per local rank: local rank i uses the i-th entry.
// Throws hora::UsageError when there is no device, when the value is malformed, when the
// chosen device is not in [0, device_count), or when the list has no entry for local_rank.
int select_device(int local_rank, const char* hora_cuda_device_env, int device_count);

// Synchronizes `stream` (a cudaStream_t) before a host collective given it. Returns CUDA's error
// text, or "" on success; the CUDA error is cleared. Without NCCL: "".
std::string synchronize_stream(void* stream);

class Backend : public detail::Backend {
 public:
  // A launched rank: communicators are formed through `client`, which must outlive the backend.
  // Cheap: no CUDA or NCCL call happens before the first collective.
  Backend(const WorldInfo& world, rdv::Client& client, std::chrono::milliseconds timeout);
  // A world of one (no launcher, no rendezvous). Throws UsageError if world.size != 1.
  Backend(const WorldInfo& world, std::chrono::milliseconds timeout);
  ~Backend() override;  // finalizes and destroys healthy communicators (bounded by the timeout)
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // The collectives of <hora/hora.h> on device buffers, enqueued on `stream` (a cudaStream_t;
  // nullptr is the default stream) and waited for before returning. Arguments mean what they
  // mean in hora.h; sendbuf == recvbuf is in place everywhere except alltoall, where it is a
  // UsageError.
  void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
                 Scope scope, void* stream) override;
  void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                 const std::vector<std::size_t>& counts, DataType type, Scope scope,
                 void* stream) override;
  void broadcast(void* buffer, std::size_t count, DataType type, int root, Scope scope,
                 void* stream) override;
  void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
                const std::vector<std::size_t>& recv_splits, DataType type, Scope scope,
                void* stream) override;
  void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                     ReduceOp op, Scope scope, void* stream) override;
  void barrier(Scope scope, void* stream) override;

  // Aborts every communicator; collectives waiting now or called later throw AbortedError
  // carrying `reason`. Idempotent, callable from any thread.
  void abort(const std::string& reason) override;

  const char* name() const override { return "nccl"; }
  // Nothing to do early: the communicators are finalized when the last holder drops the
  // backend (the destructor), bounded by the timeout.
  void close() override {}

  // The CUDA device this rank uses (select_device with HORA_CUDA_DEVICE and the visible device
  // count). Throws UsageError without a GPU.
  int device();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hora::detail::nccl
