#include "runtime/core/abort_state.h"

#include <utility>

namespace hora::detail {

bool AbortState::abort(const std::string& reason) {
  std::vector<Hook> hooks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (reason_) return false;
    reason_ = reason;
    hooks = hooks_;  // run outside the lock: a hook may take locks of its own
  }
  for (auto& hook : hooks) hook(reason);
  return true;
}

void AbortState::on_abort(Hook hook) {
  std::optional<std::string> reason;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    hooks_.push_back(hook);
    reason = reason_;
  }
  if (reason) hook(*reason);
}

std::optional<std::string> AbortState::reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reason_;
}

}  // namespace hora::detail
