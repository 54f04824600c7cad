// The NCCL backend (compiled only with NCCL; disabled.cc stands in otherwise). The protocol,
// the communicators and the threading rules are described in backend.h.
#include "runtime/nccl/backend.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "common/duration.h"
#include "common/job_environment.h"
#include "rendezvous/client.h"
#include "runtime/core/blocks.h"
#include "runtime/nccl/unique_id.h"

namespace hora::detail::nccl {

static_assert(NCCL_UNIQUE_ID_BYTES == kUniqueIdBytes, "ncclUniqueId size changed");
static_assert(sizeof(ncclUniqueId) == kUniqueIdBytes, "ncclUniqueId layout changed");

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kCudaDeviceVariable = job_env::kCudaDevice;

ncclDataType_t to_nccl(DataType type) {
  switch (type) {
    case DataType::kUInt8: return ncclUint8;
    case DataType::kInt8: return ncclInt8;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kInt16:
      throw UsageError(
          "NCCL has no int16 type: reduce int16 tensors in host memory (hora.torch "
          "stages them there) or convert them to int32");
  }
  throw UsageError(fmt::format("unknown hora::DataType {}", static_cast<int>(type)));
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAverage: return ncclAvg;  // NCCL divides by the communicator's size
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kProduct: return ncclProd;
  }
  throw UsageError(fmt::format("unknown hora::ReduceOp {}", static_cast<int>(op)));
}

std::string cuda_text(cudaError_t e) {
  return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

// NCCL's text for a result plus its last error message, which is often the useful part
// ("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000").
std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  if (last == nullptr || *last == '\0') return ncclGetErrorString(r);
  return fmt::format("{}: {}", ncclGetErrorString(r), last);
}

bool contains(const std::string& text, const char* needle) {
  return text.find(needle) != std::string::npos;
}

const char* byte_ptr(const void* p, std::size_t offset) {
  return static_cast<const char*>(p) + offset;
}
char* byte_ptr(void* p, std::size_t offset) { return static_cast<char*>(p) + offset; }

// Makes `device` current for the calling thread and restores the caller's device afterwards, so
// a training loop that keeps another device current is not disturbed.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();  // no current device yet: nothing to restore
      previous_ = -1;
    }
    if (previous_ != device) {
      cudaError_t e = cudaSetDevice(device);
      if (e != cudaSuccess) {
        cudaGetLastError();
        throw Error(fmt::format("cudaSetDevice({}) failed: {}", device, cuda_text(e)));
      }
      restore_ = previous_ >= 0;
    }
  }
  ~DeviceGuard() {
    // Restoring is best effort: the collective's outcome is already decided.
    if (restore_ && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool restore_ = false;
};

// A temporary device buffer for in-place layouts NCCL cannot do directly. Freed after the
// collective completed (cudaFree synchronizes, which is harmless then).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw Error(fmt::format("cudaMalloc of {} bytes for a staging buffer failed: {}", bytes,
                              cuda_text(e)));
    }
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr && cudaFree(ptr_) != cudaSuccess) cudaGetLastError();
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// How a waiting loop paces itself: yield for the first 200 us (small collectives finish in
// that time), then sleep with a growing interval capped at 1 ms, which bounds how late an abort
// or a completion is noticed.
class Pacer {
 public:
  void pause() {
    auto waited = Clock::now() - start_;
    if (waited < std::chrono::microseconds(200)) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(interval_);
    interval_ = std::min(interval_ * 2, std::chrono::microseconds(1000));
  }

 private:
  Clock::time_point start_ = Clock::now();
  std::chrono::microseconds interval_{20};
};

}  // namespace

// --- Free functions ---

bool compiled() { return true; }

int version() {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

// --- Backend ---

struct Backend::Impl {
  // One communicator slot per scope. `comm` is null until first use, and again after a failure;
  // `broken` then says why, and every later collective of that scope throws it.
  struct Comm {
    ncclComm_t comm = nullptr;
    CommGroup group;
    std::string broken;
    bool creating = false;  // between ncclCommInitRankConfig and the end of its wait
  };

  Impl(const WorldInfo& w, rdv::Client* c, std::chrono::milliseconds t)
      : world(w), client(c), timeout(t) {
    for (Scope s : {Scope::kGlobal, Scope::kLocal, Scope::kCross}) {
      comms[static_cast<std::size_t>(s)].group = comm_group(world, s);
    }
  }

  const WorldInfo world;
  rdv::Client* const client;  // null in a world of one
  const std::chrono::milliseconds timeout;

  // Held for the whole of a collective (and by the destructor): guards everything below it.
  std::mutex op_mutex;
  std::array<Comm, 3> comms;
  int device = -1;              // selected on first use
  cudaEvent_t event = nullptr;  // recorded after each collective, on `device`
  void* scratch = nullptr;      // one byte on `device`, for barrier

  // Set by abort() from any thread; read by waiting loops.
  std::atomic<bool> aborted{false};
  std::mutex reason_mutex;
  std::string abort_reason;

  std::string who() const { return nccl::sized_who(world); }

  std::string reason() {
    std::lock_guard<std::mutex> lock(reason_mutex);
    return abort_reason;
  }

  Comm& slot(Scope scope) {
    auto index = static_cast<std::size_t>(scope);
    if (index >= comms.size()) {
      throw UsageError(fmt::format("{}: unknown hora::Scope {}", who(), index), world.rank,
                       world.hostname);
    }
    return comms[index];
  }

  // Aborts every live communicator. NCCL's result is ignored on purpose: abort is the last
  // thing done with a communicator and there is nothing left to do if it fails.
  void abort_comms(const std::string& why) {
    for (Comm& c : comms) {
      if (c.comm != nullptr) {
        ncclCommAbort(c.comm);
        c.comm = nullptr;
      }
      if (c.broken.empty()) c.broken = why;
    }
  }

  // Call with op_mutex held whenever the abort flag may have been raised.
  void throw_if_aborted(const std::string& step) {
    if (!aborted.load()) return;
    std::string why = reason();
    abort_comms(why);
    throw AbortedError(fmt::format("{}: {} stopped: the job was aborted ({}); NCCL "
                                   "communicators were aborted",
                                   who(), step, why),
                       world.rank, world.hostname);
  }

  // Marks c unusable, aborts it, and throws the error that describes r.
  [[noreturn]] void fail(Comm& c, ncclResult_t r, const std::string& step) {
    std::string text = nccl_text(r, c.comm);
    if (c.comm != nullptr) {
      ncclCommAbort(c.comm);  // see abort_comms for why the result is ignored
      c.comm = nullptr;
    }
    if (c.creating && r == ncclInvalidUsage) {
      c.creating = false;
      duplicate_gpu(c, step, text);
    }
    c.creating = false;
    std::string where = fmt::format("{} (GPU {})", describe(c.group), device);
    c.broken = fmt::format("{} failed earlier: {}", step, text);
    if (r == ncclRemoteError || r == ncclSystemError) {
      throw PeerFailure(
          fmt::format("{}: {} on {} failed: {}. A peer rank probably died or its network "
                      "connection dropped; the communicator was aborted",
                      who(), step, where, text),
          world.rank, world.hostname, -1);
    }
    throw Error(fmt::format("{}: {} on {} failed: {}; the communicator was aborted", who(), step,
                            where, text),
                world.rank, world.hostname);
  }

  [[noreturn]] void fail_cuda(Comm& c, cudaError_t e, const std::string& step) {
    cudaGetLastError();
    if (c.comm != nullptr) {
      ncclCommAbort(c.comm);  // see abort_comms for why the result is ignored
      c.comm = nullptr;
    }
    c.broken = fmt::format("{} failed earlier: CUDA: {}", step, cuda_text(e));
    throw Error(fmt::format("{}: {} on {} (GPU {}) failed in CUDA: {}{}", who(), step,
                            describe(c.group), device, cuda_text(e),
                            e == cudaErrorInvalidResourceHandle
                                ? fmt::format("; is the stream a stream of GPU {}?", device)
                                : std::string{}),
                world.rank, world.hostname);
  }

  [[noreturn]] void time_out(Comm& c, const std::string& step) {
    if (c.comm != nullptr) {
      ncclCommAbort(c.comm);  // see abort_comms for why the result is ignored
      c.comm = nullptr;
    }
    c.broken = fmt::format("{} timed out earlier", step);
    throw TimeoutError(
        fmt::format("{}: {} on {} (GPU {}) did not complete within {} (HORA_TIMEOUT_SECONDS); "
                    "the communicator was aborted. A peer may have died, or the ranks did not "
                    "make the same GPU collectives in the same order",
                    who(), step, describe(c.group), device, format_duration(timeout)),
        world.rank, world.hostname);
  }

  // Polls c until NCCL's asynchronous state leaves ncclInProgress and, when `event` is given,
  // until the event has completed. Fails on an NCCL or CUDA error, the deadline or an abort.
  void wait(Comm& c, cudaEvent_t until, const std::string& step, Clock::time_point deadline) {
    Pacer pacer;
    for (;;) {
      throw_if_aborted(step);
      ncclResult_t state = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(c.comm, &state);
      if (r != ncclSuccess) fail(c, r, step);
      if (state != ncclSuccess && state != ncclInProgress) fail(c, state, step);
      if (state == ncclSuccess) {
        if (until == nullptr) return;
        cudaError_t q = cudaEventQuery(until);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) fail_cuda(c, q, step);
      }
      if (Clock::now() >= deadline) time_out(c, step);
      pacer.pause();
    }
  }

  int ensure_device() {
    if (device >= 0) return device;
    int count = 0;
    if (gpu_available()) {
      cudaError_t e = cudaGetDeviceCount(&count);
      if (e != cudaSuccess) {
        cudaGetLastError();
        count = 0;
      }
    }
    try {
      device = select_device(world.local_rank, std::getenv(kCudaDeviceVariable), count);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{} (local rank {}): {}", who(), world.local_rank, e.what()),
                       world.rank, world.hostname);
    }
    return device;
  }

  // Event and scratch byte on `device`; the device guard of the calling collective is active.
  void ensure_device_resources(Comm& c, const std::string& step) {
    if (event == nullptr) {
      cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
      if (e != cudaSuccess) {
        event = nullptr;
        fail_cuda(c, e, step);
      }
    }
    if (scratch == nullptr) {
      cudaError_t e = cudaMalloc(&scratch, 1);
      if (e != cudaSuccess) {
        scratch = nullptr;
        fail_cuda(c, e, step);
      }
    }
  }

  // Forms the communicator of c's scope (see the protocol in backend.h).
  void create(Comm& c, const std::string& step, Clock::time_point deadline) {
    const std::string creating = fmt::format("creating {} for {}", describe(c.group), step);
    UniqueId id;
    try {
      id = exchange_unique_id(
          client, world, c.group,
          [&] {
            ncclUniqueId raw;
            ncclResult_t r = ncclGetUniqueId(&raw);
            if (r != ncclSuccess) {
              throw Error(fmt::format("{}: ncclGetUniqueId failed while {}: {}. NCCL bootstraps "
                                      "over NCCL_SOCKET_IFNAME (now \"{}\")",
                                      who(), creating, nccl_text(r, nullptr),
                                      std::getenv(job_env::kNcclSocketIfname)
                                          ? std::getenv(job_env::kNcclSocketIfname)
                                          : ""),
                          world.rank, world.hostname);
            }
            UniqueId bytes;
            std::memcpy(bytes.data(), raw.internal, kUniqueIdBytes);
            return bytes;
          },
          deadline);
    } catch (const Error& e) {
      // The ranks of this scope no longer agree on where they are (some may be initializing
      // with the id already): a later attempt could not be matched, so the scope is closed.
      c.broken = fmt::format("{} failed earlier: {}", creating, e.what());
      throw;
    }
    throw_if_aborted(creating);

    ncclUniqueId raw;
    std::memcpy(raw.internal, id.data(), kUniqueIdBytes);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // init returns at once; wait() polls it against the deadline
    static constexpr const char* kNames[] = {"hora-global", "hora-local", "hora-cross"};
    config.commName = kNames[static_cast<std::size_t>(c.group.scope)];

    ncclComm_t comm = nullptr;
    c.creating = true;
    ncclResult_t r = ncclCommInitRankConfig(&comm, c.group.nranks, raw, c.group.rank, &config);
    c.comm = comm;
    if (r != ncclSuccess && r != ncclInProgress) fail(c, r, creating);
    wait(c, nullptr, creating, deadline);
    c.creating = false;
  }

  // NCCL answers ncclInvalidUsage at init when two ranks of a communicator share a GPU
  // ("Duplicate GPU detected"). That is by far the usual cause, so say how to fix it; when
  // NCCL's last error confirms it, say so without hedging.
  [[noreturn]] void duplicate_gpu(Comm& c, const std::string& step, const std::string& text) {
    c.broken = fmt::format("{} failed earlier: {}", step, text);
    const bool certain = contains(text, "Duplicate GPU");
    throw UsageError(
        fmt::format("{}: {} failed: {}. {} two ranks of {} on one GPU (this rank uses GPU {}): "
                    "give each rank its own GPU, e.g. at most one rank per visible GPU on each "
                    "host (-H host:<gpus>), or a different CUDA_VISIBLE_DEVICES or "
                    "{} per rank",
                    who(), step, text, certain ? "NCCL refuses" : "The usual cause is",
                    describe(c.group), device, kCudaDeviceVariable),
        world.rank, world.hostname);
  }

  // Everything a collective does around its NCCL calls: one at a time; abort check; device,
  // communicator and resources ready; enqueue (which may return ncclInProgress on a
  // non-blocking communicator); then wait for the enqueue and for the GPU to finish.
  template <typename Enqueue>
  void run(Scope scope, const std::string& step, void* stream, Enqueue&& enqueue) {
    run(scope, step, stream, enqueue, [](cudaStream_t) { return cudaSuccess; });
  }

  // As above; `after` enqueues stream work that must follow the NCCL calls (a copy out of a
  // staging buffer) once NCCL has finished enqueueing them.
  template <typename Enqueue, typename After>
  void run(Scope scope, const std::string& step, void* stream, Enqueue&& enqueue, After&& after) {
    std::lock_guard<std::mutex> lock(op_mutex);
    const Clock::time_point deadline = Clock::now() + timeout;
    throw_if_aborted(step);
    Comm& c = slot(scope);
    if (!c.broken.empty()) {
      throw Error(fmt::format("{}: {} on {}: the communicator is unusable ({}); NCCL "
                              "communicators cannot be repaired, restart the job",
                              who(), step, describe(c.group), c.broken),
                  world.rank, world.hostname);
    }
    std::optional<DeviceGuard> guard;
    try {
      guard.emplace(ensure_device());
    } catch (const UsageError&) {
      throw;  // already names this rank
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}: {}", who(), step, e.what()), world.rank, world.hostname);
    }
    if (c.comm == nullptr) create(c, step, deadline);
    ensure_device_resources(c, step);

    auto s = static_cast<cudaStream_t>(stream);
    ncclResult_t r = enqueue(c.comm, s);
    if (r != ncclSuccess && r != ncclInProgress) fail(c, r, step);
    wait(c, nullptr, step, deadline);  // the enqueue itself has finished
    cudaError_t e = after(s);
    if (e != cudaSuccess) fail_cuda(c, e, step);
    e = cudaEventRecord(event, s);
    if (e != cudaSuccess) fail_cuda(c, e, step);
    wait(c, event, step, deadline);
  }

  // Destroys healthy communicators at shutdown: finalize (flushes outstanding work, polled
  // against the timeout), then destroy; abort when anything goes wrong.
  void close() {
    std::lock_guard<std::mutex> lock(op_mutex);
    std::optional<DeviceGuard> guard;
    if (device >= 0) {
      try {
        guard.emplace(device);
      } catch (const Error&) {
        // The device is gone (driver reset?): aborting below is all that is left to do.
      }
    }
    const Clock::time_point deadline = Clock::now() + timeout;
    for (Comm& c : comms) {
      if (c.comm == nullptr) continue;
      bool clean = false;
      ncclResult_t r = aborted.load() ? ncclInternalError : ncclCommFinalize(c.comm);
      if (r == ncclSuccess || r == ncclInProgress) {  // in progress: poll until quiescent
        Pacer pacer;
        for (;;) {
          ncclResult_t state = ncclSuccess;
          if (ncclCommGetAsyncError(c.comm, &state) != ncclSuccess) break;
          if (state == ncclSuccess) {
            clean = true;
            break;
          }
          if (state != ncclInProgress || aborted.load() || Clock::now() >= deadline) break;
          pacer.pause();
        }
      }
      // Results ignored: this runs from a destructor, and abort is the fallback of destroy.
      if (clean) {
        ncclCommDestroy(c.comm);
      } else {
        ncclCommAbort(c.comm);
      }
      c.comm = nullptr;
    }
    if (event != nullptr && cudaEventDestroy(event) != cudaSuccess) cudaGetLastError();
    if (scratch != nullptr && cudaFree(scratch) != cudaSuccess) cudaGetLastError();
    event = nullptr;
    scratch = nullptr;
  }

  void check_scope_rank(const CommGroup& g, int root, const char* what) {
    if (root < 0 || root >= g.nranks) {
      throw UsageError(fmt::format("{}: {} root {} is not a rank of {} (0..{})", who(), what, root,
                                   describe(g), g.nranks - 1),
                       world.rank, world.hostname);
    }
  }

  void check_buffer(const void* p, std::size_t count, const char* what, const char* name) {
    if (count > 0 && p == nullptr) {
      throw UsageError(fmt::format("{}: {}: {} is null but count is {}", who(), what, name, count),
                       world.rank, world.hostname);
    }
  }
};

Backend::Backend(const WorldInfo& world, rdv::Client& client, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(world, &client, timeout)) {}

Backend::Backend(const WorldInfo& world, std::chrono::milliseconds timeout) {
  if (world.size != 1) {
    throw UsageError(fmt::format("{}: the NCCL backend needs a rendezvous client when the world "
                                 "has more than one rank (size {})",
                                 sized_who(world), world.size),
                     world.rank, world.hostname);
  }
  impl_ = std::make_unique<Impl>(world, nullptr, timeout);
}

Backend::~Backend() { impl_->close(); }

void Backend::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(impl_->reason_mutex);
    if (impl_->abort_reason.empty()) impl_->abort_reason = reason;
  }
  // Only the flag: abort() runs on the rendezvous reader thread (as a hook that must not
  // block), and ncclCommAbort can take a while. A collective in flight sees the flag within a
  // millisecond and aborts the communicators from its own thread; idle communicators are aborted
  // by the next collective (which then throws) or by the destructor.
  impl_->aborted.store(true);
}

int Backend::device() {
  std::lock_guard<std::mutex> lock(impl_->op_mutex);
  return impl_->ensure_device();
}

void Backend::allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                        ReduceOp op, Scope scope, void* stream) {
  const std::string step =
      fmt::format("NCCL allreduce of {} {} ({})", count, name_of(type), name_of(op));
  ncclDataType_t t = to_nccl(type);
  ncclRedOp_t o = to_nccl(op);
  impl_->check_buffer(sendbuf, count, step.c_str(), "sendbuf");
  impl_->check_buffer(recvbuf, count, step.c_str(), "recvbuf");
  if (count == 0) return;  // every rank passes the same count, so every rank skips
  impl_->run(scope, step, stream, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclAllReduce(sendbuf, recvbuf, count, t, o, comm, s);
  });
}

void Backend::broadcast(void* buffer, std::size_t count, DataType type, int root, Scope scope,
                        void* stream) {
  const std::string step =
      fmt::format("NCCL broadcast of {} {} from root {}", count, name_of(type), root);
  ncclDataType_t t = to_nccl(type);
  impl_->check_scope_rank(impl_->slot(scope).group, root, "broadcast");
  impl_->check_buffer(buffer, count, step.c_str(), "buffer");
  if (count == 0) return;
  impl_->run(scope, step, stream, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclBroadcast(buffer, buffer, count, t, root, comm, s);
  });
}

void Backend::allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                        const std::vector<std::size_t>& counts, DataType type, Scope scope,
                        void* stream) {
  const std::string step = fmt::format("NCCL allgather of {} {}", count, name_of(type));
  ncclDataType_t t = to_nccl(type);
  const CommGroup& g = impl_->slot(scope).group;
  if (counts.size() != static_cast<std::size_t>(g.nranks) ||
      counts[static_cast<std::size_t>(g.rank)] != count) {
    throw UsageError(
        fmt::format("{}: {}: counts must have one entry per rank of {} with counts[{}] == {} "
                    "(got {} entries{})",
                    impl_->who(), step, describe(g), g.rank, count, counts.size(),
                    counts.size() > static_cast<std::size_t>(g.rank)
                        ? fmt::format(", counts[{}] = {}", g.rank,
                                      counts[static_cast<std::size_t>(g.rank)])
                        : std::string{}),
        impl_->world.rank, impl_->world.hostname);
  }
  const std::size_t es = size_of(type);
  std::size_t total = 0;
  std::vector<std::size_t> offsets(counts.size());
  for (std::size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = total;
    total += counts[r];
  }
  impl_->check_buffer(sendbuf, count, step.c_str(), "sendbuf");
  impl_->check_buffer(recvbuf, total, step.c_str(), "recvbuf");
  if (total == 0) return;  // every rank sees the same counts

  const std::size_t my_offset = offsets[static_cast<std::size_t>(g.rank)] * es;
  const bool uniform =
      std::all_of(counts.begin(), counts.end(), [&](std::size_t c) { return c == counts.front(); });
  // In place means sendbuf is this rank's block of recvbuf (NCCL's convention). Any other
  // overlap would be overwritten by a peer's block before it is sent: stage it first.
  std::optional<DeviceBuffer> staged;
  const void* source = sendbuf;
  const bool in_place = sendbuf == byte_ptr(recvbuf, my_offset);
  impl_->run(scope, step, stream, [&](ncclComm_t comm, cudaStream_t s) -> ncclResult_t {
    if (!in_place && overlap(sendbuf, count * es, recvbuf, total * es)) {
      staged.emplace(count * es);
      cudaError_t e =
          cudaMemcpyAsync(staged->get(), sendbuf, count * es, cudaMemcpyDeviceToDevice, s);
      if (e != cudaSuccess) {
        cudaGetLastError();
        // Nothing was handed to NCCL yet, so the communicator stays usable.
        throw Error(fmt::format("{}: {}: staging sendbuf on the stream failed: {}", impl_->who(),
                                step, cuda_text(e)),
                    impl_->world.rank, impl_->world.hostname);
      }
      source = staged->get();
    }
    if (uniform) return ncclAllGather(source, recvbuf, count, t, comm, s);
    // Different counts: one broadcast per rank, fused in a group.
    ncclResult_t first = ncclGroupStart();
    if (first != ncclSuccess) return first;
    for (int r = 0; r < g.nranks; ++r) {
      auto ur = static_cast<std::size_t>(r);
      if (counts[ur] == 0) continue;
      ncclResult_t res =
          ncclBroadcast(r == g.rank ? source : nullptr, byte_ptr(recvbuf, offsets[ur] * es),
                        counts[ur], t, r, comm, s);
      if (first == ncclSuccess && res != ncclSuccess && res != ncclInProgress) first = res;
    }
    ncclResult_t end = ncclGroupEnd();
    return first != ncclSuccess ? first : end;
  });
}

void Backend::alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits,
                       void* recvbuf, const std::vector<std::size_t>& recv_splits, DataType type,
                       Scope scope, void* stream) {
  const std::string step = fmt::format("NCCL alltoall of {}", name_of(type));
  ncclDataType_t t = to_nccl(type);
  const CommGroup& g = impl_->slot(scope).group;
  const auto n = static_cast<std::size_t>(g.nranks);
  const auto me = static_cast<std::size_t>(g.rank);
  if (send_splits.size() != n || recv_splits.size() != n) {
    throw UsageError(fmt::format("{}: {}: send_splits and recv_splits need one entry per rank "
                                 "of {} (got {} and {})",
                                 impl_->who(), step, describe(g), send_splits.size(),
                                 recv_splits.size()),
                     impl_->world.rank, impl_->world.hostname);
  }
  if (send_splits[me] != recv_splits[me]) {
    throw UsageError(fmt::format("{}: {}: send_splits[{}] = {} but recv_splits[{}] = {}: what "
                                 "a rank sends itself must equal what it receives from itself",
                                 impl_->who(), step, me, send_splits[me], me, recv_splits[me]),
                     impl_->world.rank, impl_->world.hostname);
  }
  const std::size_t es = size_of(type);
  std::vector<std::size_t> send_off(n), recv_off(n);
  std::size_t send_total = 0, recv_total = 0;
  for (std::size_t r = 0; r < n; ++r) {
    send_off[r] = send_total;
    recv_off[r] = recv_total;
    send_total += send_splits[r];
    recv_total += recv_splits[r];
  }
  impl_->check_buffer(sendbuf, send_total, step.c_str(), "sendbuf");
  impl_->check_buffer(recvbuf, recv_total, step.c_str(), "recvbuf");
  if (overlap(sendbuf, send_total * es, recvbuf, recv_total * es)) {
    throw UsageError(fmt::format("{}: {}: sendbuf and recvbuf overlap; alltoall on GPU buffers "
                                 "is not in place, use separate buffers",
                                 impl_->who(), step),
                     impl_->world.rank, impl_->world.hostname);
  }
  if (send_total == 0 && recv_total == 0) return;  // nothing to send or receive on this rank
  impl_->run(scope, step, stream, [&](ncclComm_t comm, cudaStream_t s) -> ncclResult_t {
    // Every pair's send and receive in one group, so they progress together (no ordering
    // deadlock); a rank's block to itself is a send/receive to itself.
    ncclResult_t first = ncclGroupStart();
    if (first != ncclSuccess) return first;
    auto note = [&](ncclResult_t res) {
      if (first == ncclSuccess && res != ncclSuccess && res != ncclInProgress) first = res;
    };
    for (std::size_t r = 0; r < n; ++r) {
      const int peer = static_cast<int>(r);
      if (send_splits[r] > 0) {
        note(ncclSend(byte_ptr(sendbuf, send_off[r] * es), send_splits[r], t, peer, comm, s));
      }
      if (recv_splits[r] > 0) {
        note(ncclRecv(byte_ptr(recvbuf, recv_off[r] * es), recv_splits[r], t, peer, comm, s));
      }
    }
    ncclResult_t end = ncclGroupEnd();
    return first != ncclSuccess ? first : end;
  });
}

void Backend::reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                            ReduceOp op, Scope scope, void* stream) {
  const std::string step =
      fmt::format("NCCL reducescatter of {} {} ({})", count, name_of(type), name_of(op));
  ncclDataType_t t = to_nccl(type);
  ncclRedOp_t o = to_nccl(op);
  const CommGroup& g = impl_->slot(scope).group;
  const std::size_t es = size_of(type);
  const std::size_t mine = block_count(count, g.rank, g.nranks);
  const std::size_t my_offset = block_offset(count, g.rank, g.nranks) * es;
  impl_->check_buffer(sendbuf, count, step.c_str(), "sendbuf");
  impl_->check_buffer(recvbuf, mine, step.c_str(), "recvbuf");
  if (count == 0) return;

  // In place means recvbuf is this rank's block of sendbuf; any other overlap would be
  // overwritten while peers' blocks are still being read from it: reduce into a staging buffer.
  const bool in_place = recvbuf == byte_ptr(sendbuf, my_offset);
  std::optional<DeviceBuffer> staged;
  void* target = recvbuf;
  auto enqueue = [&](ncclComm_t comm, cudaStream_t s) -> ncclResult_t {
    if (mine > 0 && !in_place && overlap(sendbuf, count * es, recvbuf, mine * es)) {
      staged.emplace(mine * es);
      target = staged->get();
    }
    if (count % static_cast<std::size_t>(g.nranks) == 0) {
      return ncclReduceScatter(sendbuf, target, mine, t, o, comm, s);
    }
    // Uneven blocks: one reduce per block, rooted at the block's owner, fused in a group.
    ncclResult_t first = ncclGroupStart();
    if (first != ncclSuccess) return first;
    for (int r = 0; r < g.nranks; ++r) {
      std::size_t n = block_count(count, r, g.nranks);
      if (n == 0) continue;
      ncclResult_t res = ncclReduce(byte_ptr(sendbuf, block_offset(count, r, g.nranks) * es),
                                    r == g.rank ? target : nullptr, n, t, o, r, comm, s);
      if (first == ncclSuccess && res != ncclSuccess && res != ncclInProgress) first = res;
    }
    ncclResult_t end = ncclGroupEnd();
    return first != ncclSuccess ? first : end;
  };
  auto copy_out = [&](cudaStream_t s) {
    if (!staged) return cudaSuccess;
    return cudaMemcpyAsync(recvbuf, target, mine * es, cudaMemcpyDeviceToDevice, s);
  };
  impl_->run(scope, step, stream, enqueue, copy_out);
}

void Backend::barrier(Scope scope, void* stream) {
  const std::string step = "NCCL barrier";
  impl_->run(scope, step, stream, [&](ncclComm_t comm, cudaStream_t s) {
    // A one-byte allreduce: no rank completes it before every rank has started it.
    return ncclAllReduce(impl_->scratch, impl_->scratch, 1, ncclUint8, ncclSum, comm, s);
  });
}

}  // namespace hora::detail::nccl
