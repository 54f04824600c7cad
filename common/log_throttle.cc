#include "common/log_throttle.h"

namespace hora {

bool LogThrottle::admit(const std::string& kind, Clock::time_point now, Summary summary) {
  auto it = kinds_.find(kind);
  if (it == kinds_.end()) {
    kinds_.emplace(kind, Kind{now + window_, 1, false, std::move(summary)});
    return true;
  }
  Kind& k = it->second;
  if (now >= k.window_end && !k.suppressed) {
    // Quiet for a whole window (flush() was not called in between): a fresh start.
    k = Kind{now + window_, 1, false, std::move(summary)};
    return true;
  }
  ++k.count;
  k.suppressed = true;
  k.summary = std::move(summary);
  return false;
}

std::vector<std::string> LogThrottle::flush(Clock::time_point now) {
  std::vector<std::string> lines;
  for (auto it = kinds_.begin(); it != kinds_.end();) {
    Kind& k = it->second;
    if (now < k.window_end) {
      ++it;
      continue;
    }
    if (!k.suppressed) {
      it = kinds_.erase(it);
      continue;
    }
    lines.push_back(k.summary(k.count));
    k.count = 0;
    k.suppressed = false;
    k.window_end = now + window_;  // still flooding: keep counting in a new window
    ++it;
  }
  return lines;
}

std::optional<LogThrottle::Clock::time_point> LogThrottle::next_flush() const {
  std::optional<Clock::time_point> next;
  for (const auto& [name, k] : kinds_) {
    if (!next || k.window_end < *next) next = k.window_end;
  }
  return next;
}

}  // namespace hora
