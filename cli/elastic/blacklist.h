// The elastic job's host blacklist, Horovod's rule (horovod/runner/elastic/discovery.py,
// HostState and HostManager):
// - a host where a worker failed is blacklisted;
// - without --blacklist-cooldown-range it stays blacklisted for the rest of the job;
// - with --blacklist-cooldown-range MIN MAX its n-th blacklisting (n = 1, 2, ...) starts a
//   cooldown of MIN * 2^n + U * MIN seconds, U uniform in [0, 1), clamped to [MIN, MAX]; when
//   the cooldown ends the host is available again (whitelisted) and keeps its count n, so each
//   failure keeps it out longer;
// - blacklisting a host during its cooldown changes nothing (neither the end nor n).
// The clock and the random source are the caller's: every call takes `now`, and the
// constructor takes the source of U, so tests are deterministic.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hora::cli {

class Blacklist {
 public:
  using Clock = std::chrono::steady_clock;
  using Seconds = std::chrono::seconds;
  // Returns a number uniform in [0, 1).
  using Random = std::function<double()>;

  // `cooldown`: ElasticOptions::blacklist_cooldown (MIN <= MAX); nullopt: no cooldown, a
  // blacklisted host never comes back. `random`: the source of U; empty: a std::mt19937 seeded
  // from std::random_device.
  explicit Blacklist(std::optional<std::pair<Seconds, Seconds>> cooldown, Random random = {});

  // A worker of `host` failed (or its agent was lost, or discovery dropped it while it ran
  // workers). Returns the end of its cooldown, nullopt when it has none (never comes back).
  std::optional<Clock::time_point> blacklist(const std::string& host, Clock::time_point now);

  // Whether `host` may not run workers at `now`: blacklisted and its cooldown (if any) not
  // over.
  bool is_blacklisted(const std::string& host, Clock::time_point now) const;

  // The hosts blacklisted at `now`, sorted by name (what round_plan takes).
  std::vector<std::string> blacklisted(Clock::time_point now) const;

  // The hosts whose cooldown has ended by `now` and that were not taken yet, sorted by name;
  // they are whitelisted (Horovod's whitelist(): the failure count is kept). For the log line
  // "host X is back after its cooldown".
  std::vector<std::string> take_cooled_down(Clock::time_point now);

  // The earliest end of a cooldown after `now` (a timer for the event loop); nullopt if none.
  std::optional<Clock::time_point> next_cooldown_end(Clock::time_point now) const;

  // How many times `host` was blacklisted with a new cooldown (n above; 0 if never). Without a
  // cooldown range: 1 once blacklisted.
  int failures(const std::string& host) const;

 private:
  struct HostState {
    bool blacklisted = false;
    int count = 0;
    std::optional<Clock::time_point> cooldown_end;  // nullopt: none running
  };

  std::optional<std::pair<Seconds, Seconds>> cooldown_;
  Random random_;
  std::map<std::string, HostState> hosts_;
};

}  // namespace hora::cli
