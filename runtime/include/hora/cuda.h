// libhora on GPU buffers (NCCL). Needs no CUDA header: a stream is passed as `void*` (a
// cudaStream_t converts to it implicitly; nullptr is the default stream).
//
//   hora::init();
//   cudaSetDevice(hora::cuda_device());           // the GPU hora uses for this rank
//   cudaMalloc(&grad, n * sizeof(float));
//   ...
//   hora::allreduce(grad, grad, n, hora::DataType::kFloat32, hora::ReduceOp::kAverage, stream);
//
// Routing. Every collective below looks at its buffers (cudaPointerGetAttributes): device or
// managed memory goes to NCCL, host memory (pageable or pinned) to the Gloo path of <hora/hora.h>
// after `stream` has been synchronized, so a stream-ordered copy to the host has landed first.
// A call that mixes device and host buffers is a UsageError. The collectives of <hora/hora.h>
// route device buffers to NCCL on the default stream, so existing calls work with GPU buffers.
// A program that never touches CUDA is never made to create a CUDA context by this check.
//
// Completion. A call is ordered after the work already enqueued on `stream`, and returns once
// the collective has completed on the GPU: the result is in recvbuf and the stream is free. A
// peer that fails or stops makes the call throw (PeerFailure, TimeoutError after
// HORA_TIMEOUT_SECONDS, AbortedError when horarun ends the job) instead of hanging; the NCCL
// communicator of that scope is aborted and cannot be used again.
//
// Devices. Each rank uses one GPU: local_rank() by default, or HORA_CUDA_DEVICE ("N" for this
// rank, or "A,B,..." with one entry per local rank), counted among the devices
// CUDA_VISIBLE_DEVICES leaves visible. Two ranks on one GPU is an error NCCL refuses; give each
// rank its own GPU. Buffers must live on this rank's GPU (or be managed memory).
//
// Communicators (global, local, cross) are created on first use of their scope, through the
// rendezvous horarun runs; every rank of the scope must make the same calls in the same order.
//
// Without NCCL (built with -Dnccl=disabled, or CUDA/NCCL not found): cuda_built() and
// gpu_available() are false, and every other function here throws hora::UsageError.
#pragma once

#include <cstddef>
#include <vector>

#include <hora/error.h>
#include <hora/types.h>

namespace hora {

// True when this libhora was built with NCCL.
bool cuda_built();

// The version code of the NCCL this libhora runs with (as ncclGetVersion gives it: 21803 for
// 2.18.3), or 0 when built without NCCL. Horovod's nccl_built() returns the same.
int nccl_version();

// True when libhora was built with NCCL and CUDA reports at least one device for this process.
// Does not create a CUDA context.
bool gpu_available();

// The CUDA device index this rank uses (see "Devices" above). Throws UsageError when there is no
// GPU, HORA_CUDA_DEVICE is malformed or out of range, or before hora::init().
int cuda_device();

// --- The collectives of <hora/hora.h>, with a stream. Same arguments and rules there. ---

void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
               void* stream, Scope scope = Scope::kGlobal);

void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
               const std::vector<std::size_t>& counts, DataType type, void* stream,
               Scope scope = Scope::kGlobal);

void broadcast(void* buffer, std::size_t count, DataType type, int root, void* stream,
               Scope scope = Scope::kGlobal);

// On GPU buffers, sendbuf and recvbuf must not overlap (no in-place alltoall).
void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
              const std::vector<std::size_t>& recv_splits, DataType type, void* stream,
              Scope scope = Scope::kGlobal);

void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                   ReduceOp op, void* stream, Scope scope = Scope::kGlobal);

// With a GPU: a one-byte NCCL allreduce on this rank's GPU, so it also orders `stream`.
// Without a GPU (cuda_built() but no device), the Gloo barrier.
void barrier(void* stream, Scope scope = Scope::kGlobal);

}  // namespace hora
