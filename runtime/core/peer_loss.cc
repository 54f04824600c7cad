#include "runtime/core/peer_loss.h"

#include <mutex>

namespace hora::detail {
namespace {

struct Registry {
  std::mutex mutex;  // held while the sink runs: clearing waits for it
  std::function<void(int)> sink;
  int token = 0;
  bool reported = false;
};

Registry& registry() {
  static Registry* const r = new Registry;  // never destroyed: exit handlers may still raise
  return *r;
}

}  // namespace

int set_peer_loss_sink(std::function<void(int peer)> sink) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.sink = std::move(sink);
  r.reported = false;
  return ++r.token;
}

void clear_peer_loss_sink(int token) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.token == token) r.sink = nullptr;
}

void note_peer_loss(int peer) {
  if (peer < 0) return;
  Registry& r = registry();
  // try_lock: a PeerFailure raised while the sink runs (its own write failing) must not wait
  // for itself; the first report is the one that counts anyway.
  std::unique_lock<std::mutex> lock(r.mutex, std::try_to_lock);
  if (!lock.owns_lock() || !r.sink || r.reported) return;
  r.reported = true;
  try {
    r.sink(peer);
  } catch (...) {
    // Best effort: the launcher falls back on the order in which connections closed.
  }
}

}  // namespace hora::detail
