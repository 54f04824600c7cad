#include "cli/elastic/blacklist.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

namespace hora::cli {

Blacklist::Blacklist(std::optional<std::pair<Seconds, Seconds>> cooldown, Random random)
    : cooldown_(cooldown), random_(std::move(random)) {
  if (!random_) {
    auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
    random_ = [engine] { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
  }
}

std::optional<Blacklist::Clock::time_point> Blacklist::blacklist(const std::string& host,
                                                                 Clock::time_point now) {
  HostState& state = hosts_[host];
  state.blacklisted = true;
  if (!cooldown_) {
    state.count = 1;
    return std::nullopt;
  }
  if (state.cooldown_end && *state.cooldown_end > now) return state.cooldown_end;
  ++state.count;
  const double lo = static_cast<double>(cooldown_->first.count());
  const double hi = static_cast<double>(cooldown_->second.count());
  // lo * 2^n + U * lo, in [lo, hi]; 2^n is capped long before it could overflow a double.
  const double u = std::clamp(random_(), 0.0, 1.0);
  const double delay = lo * std::ldexp(1.0, std::min(state.count, 60)) + u * lo;
  const double seconds = std::max(lo, std::min(hi, delay));
  state.cooldown_end =
      now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  return state.cooldown_end;
}

bool Blacklist::is_blacklisted(const std::string& host, Clock::time_point now) const {
  const auto it = hosts_.find(host);
  if (it == hosts_.end() || !it->second.blacklisted) return false;
  // Horovod: blacklisted and not "resurrected" (a cooldown that ended).
  return !(it->second.cooldown_end && *it->second.cooldown_end <= now);
}

std::vector<std::string> Blacklist::blacklisted(Clock::time_point now) const {
  std::vector<std::string> out;
  for (const auto& [host, state] : hosts_) {
    if (is_blacklisted(host, now)) out.push_back(host);
  }
  return out;
}

std::vector<std::string> Blacklist::take_cooled_down(Clock::time_point now) {
  std::vector<std::string> out;
  for (auto& [host, state] : hosts_) {
    if (state.blacklisted && state.cooldown_end && *state.cooldown_end <= now) {
      state.blacklisted = false;
      state.cooldown_end.reset();
      out.push_back(host);
    }
  }
  return out;
}

std::optional<Blacklist::Clock::time_point> Blacklist::next_cooldown_end(
    Clock::time_point now) const {
  std::optional<Clock::time_point> next;
  for (const auto& [host, state] : hosts_) {
    if (state.blacklisted && state.cooldown_end && *state.cooldown_end > now &&
        (!next || *state.cooldown_end < *next)) {
      next = state.cooldown_end;
    }
  }
  return next;
}

int Blacklist::failures(const std::string& host) const {
  const auto it = hosts_.find(host);
  return it == hosts_.end() ? 0 : it->second.count;
}

}  // namespace hora::cli
