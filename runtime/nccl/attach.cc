// The process-wide backend behind <hora/cuda.h>. Compiled with and without NCCL: without it the
// attached Backend's collectives throw (disabled.cc), which keeps the runtime's calls the same.
//
// Ownership: the runtime attaches one Backend per hora::init() and detaches it in shutdown().
// Callers take a shared_ptr, so a collective running on another thread keeps its backend alive
// while shutdown() detaches; the communicators are destroyed when the last user lets go.
#include <mutex>

#include <fmt/format.h>

#include "runtime/nccl/backend.h"

namespace hora::detail::nccl {

namespace {

std::mutex g_mutex;
std::shared_ptr<Backend> g_backend;  // guarded by g_mutex

}  // namespace

void attach(const WorldInfo& world, rdv::Client* client, std::chrono::milliseconds timeout) {
  std::shared_ptr<Backend> backend =
      client != nullptr ? std::make_shared<Backend>(world, *client, timeout)
                        : std::make_shared<Backend>(world, timeout);
  std::shared_ptr<Backend> previous;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    previous = std::move(g_backend);
    g_backend = std::move(backend);
  }
  // `previous` (if any) is released here, outside the lock: its destructor may wait.
}

void detach() {
  std::shared_ptr<Backend> previous;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    previous = std::move(g_backend);
  }
}

void abort_all(const std::string& reason) {
  std::shared_ptr<Backend> backend;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    backend = g_backend;
  }
  if (backend) backend->abort(reason);
}

std::shared_ptr<Backend> current() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_backend) {
    throw UsageError("GPU collectives need hora::init() first (the NCCL backend is not attached)");
  }
  return g_backend;
}

}  // namespace hora::detail::nccl
