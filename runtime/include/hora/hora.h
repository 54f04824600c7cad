// libhora: Horovod's API for C++ training programs.
//
//   hora::init();                        // joins the job horarun started (or a world of one)
//   hora::allreduce(grad, grad, n, hora::DataType::kFloat32, hora::ReduceOp::kAverage);
//   hora::shutdown();
//
// Every function below throws hora::Error (see error.h); messages name this rank and host, the
// operation, and the peer when one is to blame. Collectives are blocking and must be called in
// the same order, with matching arguments, on every rank of the scope; they run on one thread
// at a time (use <hora/async.h> to submit from several threads or in different orders).
//
// Failures. A collective that cannot complete throws instead of hanging: PeerFailure when a
// peer closed its connection (it died), TimeoutError when no progress was made for
// HORA_TIMEOUT_SECONDS (default 30), AbortedError as soon as horarun aborts the job (another
// rank failed, or horarun was interrupted). After such an error the scope's communicator is
// closed: later collectives on it throw at once; end the program. Wrong arguments throw
// UsageError before anything is sent, and the communicator stays usable.
//
// Host buffers go through Gloo over TCP. With NCCL built in (<hora/cuda.h>), GPU buffers passed
// here are routed to NCCL on the default stream.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <hora/error.h>
#include <hora/types.h>

namespace hora {

// Reads the environment horarun sets (docs/environment.md), connects to the rendezvous, and
// forms the Gloo communicators. Without HORA_RANK in the environment it forms a world of one,
// so `./train` runs as well as `horarun -np 4 ./train`. Calling it twice is harmless.
void init();

// Leaves the job cleanly: tells the rendezvous this rank is done and tears down communicators.
// Called automatically at exit if the program did not. Safe to call twice; a world of one may
// init() again afterwards. Throws hora::ConnectionError / TimeoutError / AbortedError from init()
// when the rendezvous cannot be reached in HORA_START_TIMEOUT or the job is aborted meanwhile.
void shutdown();

bool is_initialized();

int rank();
int size();
int local_rank();
int local_size();
int cross_rank();
int cross_size();
const std::string& hostname();  // the host name this rank was launched on (HORA_HOSTNAME)

// --- Blocking collectives on contiguous host buffers. sendbuf == recvbuf means in place. ---
// Buffers need no particular alignment. A null buffer is allowed only where no element is read
// or written (count 0).

// Element-wise reduction of `count` elements over the scope, into recvbuf on every rank.
// Integers: sum and product wrap around (two's complement); kAverage sums, then divides by the
// number of ranks with truncation toward zero (-7 / 2 == -3). float16 and bfloat16 are reduced
// in float32 and rounded (to nearest even) after every step. kMin and kMax propagate NaN.
// Floating-point sums are computed in a ring order that depends on the number of ranks, so the
// last bits may differ from a sequential sum (but are the same on every rank).
void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
               Scope scope = Scope::kGlobal);

// Each rank contributes `count` elements (counts may differ per rank). recvbuf receives the
// concatenation in rank order and must hold the sum of all counts; counts[i] is rank i's count.
// sendbuf may already sit at this rank's place inside recvbuf (in place).
void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
               const std::vector<std::size_t>& counts, DataType type, Scope scope = Scope::kGlobal);

// Gathers every rank's count (so a caller can size recvbuf for allgather).
std::vector<std::size_t> allgather_counts(std::size_t count, Scope scope = Scope::kGlobal);

// root's buffer is copied to every rank of the scope. root is a rank within the scope.
void broadcast(void* buffer, std::size_t count, DataType type, int root,
               Scope scope = Scope::kGlobal);

// send_splits[i] elements go to rank i (consecutive in sendbuf, in rank order); recv_splits[i]
// elements arrive from rank i, stored the same way. send_splits[me] must equal recv_splits[me].
// The buffers may overlap (in place): the input is then staged in a copy first.
void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
              const std::vector<std::size_t>& recv_splits, DataType type,
              Scope scope = Scope::kGlobal);

// Exchanges split sizes: returns recv_splits for the given send_splits.
std::vector<std::size_t> alltoall_splits(const std::vector<std::size_t>& send_splits,
                                         Scope scope = Scope::kGlobal);

// Reduces `count` elements across ranks and scatters the result: rank r receives
// reducescatter_count(count, r, n) elements, the block that starts at the sum of the
// counts of ranks before it. Blocks are split evenly; the first count % n ranks get one more.
// Reductions behave as in allreduce (kAverage divides this rank's block). Data moves in a ring:
// each rank sends and receives (n-1)/n of the input.
void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                   ReduceOp op, Scope scope = Scope::kGlobal);
std::size_t reducescatter_count(std::size_t count, int rank, int nranks);  // needs no init()

// Returns once every rank of the scope has called barrier().
void barrier(Scope scope = Scope::kGlobal);

// --- Typed conveniences. ---

template <typename T>
void allreduce(std::vector<T>& data, ReduceOp op, Scope scope = Scope::kGlobal) {
  allreduce(data.data(), data.data(), data.size(), dtype_of<T>(), op, scope);
}

template <typename T>
std::vector<T> allgather(const std::vector<T>& data, Scope scope = Scope::kGlobal) {
  std::vector<std::size_t> counts = allgather_counts(data.size(), scope);
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  std::vector<T> out(total);
  allgather(data.data(), data.size(), out.data(), counts, dtype_of<T>(), scope);
  return out;
}

template <typename T>
void broadcast(std::vector<T>& data, int root, Scope scope = Scope::kGlobal) {
  broadcast(data.data(), data.size(), dtype_of<T>(), root, scope);
}

}  // namespace hora
