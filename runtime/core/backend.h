// What a transport of collectives implements: Gloo (runtime/gloo, host memory over TCP), NCCL
// (runtime/nccl, GPU memory) and the coming shared-memory transport (runtime/shm).
//
// A backend never decides whether an op is its own: the Runtime (runtime/process/runtime.cc)
// routes every op, in one place, by where its buffers live (host or device pointer; later by
// layout and size between shm and Gloo), after checking the arguments the public API promises to
// check (types, ops, counts, roots, splits, null buffers). A host backend is only given scopes
// of two ranks or more: a scope of one is a local copy the Runtime makes itself.
//
// The collectives mean what <hora/hora.h> says, on the given scope (kGlobal, kLocal, kCross).
// sendbuf == recvbuf is in place. kAverage divides by the scope's size inside the backend.
// `stream` is a cudaStream_t for a device backend (nullptr: the default stream); host backends
// are given nullptr. Failures are hora::Error subclasses naming rank, host, op and peer.
//
// Threading: one op at a time per scope (the caller's thread); abort() from any thread, at any
// time, without blocking. close() is called once, by the thread that shuts the process down.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <hora/types.h>

namespace hora::detail {

class Backend {
 public:
  virtual ~Backend() = default;

  // "gloo", "nccl", "shm": for messages and logs.
  virtual const char* name() const = 0;

  virtual void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                         ReduceOp op, Scope scope, void* stream) = 0;
  // counts[i] is rank i's count; recvbuf holds their sum.
  virtual void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                         const std::vector<std::size_t>& counts, DataType type, Scope scope,
                         void* stream) = 0;
  virtual void broadcast(void* buffer, std::size_t count, DataType type, int root, Scope scope,
                         void* stream) = 0;
  virtual void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits,
                        void* recvbuf, const std::vector<std::size_t>& recv_splits, DataType type,
                        Scope scope, void* stream) = 0;
  // Rank r of the scope receives reducescatter_count(count, r, n) elements.
  virtual void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                             ReduceOp op, Scope scope, void* stream) = 0;
  virtual void barrier(Scope scope, void* stream) = 0;

  // The launcher aborted the job: ops in flight fail now, later ones throw hora::AbortedError.
  virtual void abort(const std::string& reason) = 0;

  // The process is leaving cleanly (hora::shutdown()): release what can be released now. An op
  // still running on another thread keeps the backend object alive (callers hold a shared_ptr)
  // and fails or completes; ops started later are refused by the Runtime.
  virtual void close() = 0;
};

}  // namespace hora::detail
