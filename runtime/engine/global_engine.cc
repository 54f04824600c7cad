#include "runtime/engine/global_engine.h"

#include <mutex>

namespace hora::detail::engine {
namespace {

std::mutex& mutex() {
  static std::mutex mu;
  return mu;
}

std::shared_ptr<Engine>& slot() {
  static std::shared_ptr<Engine> engine;
  return engine;
}

}  // namespace

void install_engine(std::shared_ptr<Engine> engine) {
  std::shared_ptr<Engine> previous;
  {
    std::lock_guard<std::mutex> lock(mutex());
    previous = std::move(slot());
    slot() = std::move(engine);
  }
  // `previous` is released outside the lock: its destructor may shut an engine down.
}

std::shared_ptr<Engine> installed_engine() {
  std::lock_guard<std::mutex> lock(mutex());
  return slot();
}

}  // namespace hora::detail::engine
