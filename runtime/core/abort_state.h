// The launcher's abort, as one rank sees it.
//
// The rendezvous client's reader thread calls abort() when the server sends ABORT (another rank
// failed, or horarun was interrupted) or the connection to the launcher drops. Backends register
// hooks that make operations in flight fail at once (Gloo: signal every pair; NCCL: abort the
// communicators); the caller's thread then sees the failure and raises hora::AbortedError,
// as does every later call.
//
// Threading: every method may be called from any thread. Hooks run on the thread that calls
// abort(), or on the registering thread when the job was already aborted; they must not block.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace hora::detail {

class AbortState {
 public:
  using Hook = std::function<void(const std::string& reason)>;

  // The first call wins; returns false when the job was already aborted.
  bool abort(const std::string& reason);

  // Runs hook now (if aborted already) or on abort. Hooks keep what they capture alive until
  // this object is destroyed.
  void on_abort(Hook hook);

  // The launcher's reason, or nothing while the job runs.
  std::optional<std::string> reason() const;

 private:
  mutable std::mutex mutex_;
  std::optional<std::string> reason_;
  std::vector<Hook> hooks_;
};

}  // namespace hora::detail
