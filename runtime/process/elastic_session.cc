#include "runtime/process/elastic_session.h"

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "common/job_environment.h"

namespace hora::detail {
namespace {

constexpr std::chrono::seconds kDefaultTimeout{600};

bool elastic_from_environment() {
  const char* v = std::getenv(job_env::kElastic);
  return v != nullptr && std::string(v) == "1";
}

std::chrono::milliseconds timeout_from_environment() {
  const char* v = std::getenv(job_env::kElasticTimeout);
  if (v == nullptr || *v == '\0') return kDefaultTimeout;
  char* end = nullptr;
  const double seconds = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(seconds > 0) || seconds > 30.0 * 24 * 3600) {
    return kDefaultTimeout;
  }
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

int round_from_environment() {
  const char* v = std::getenv(job_env::kRound);
  if (v == nullptr) return 0;
  const long r = std::strtol(v, nullptr, 10);
  return r < 0 || r > (1L << 30) ? 0 : static_cast<int>(r);
}

}  // namespace

ElasticSession& ElasticSession::instance() {
  static ElasticSession* const session = new ElasticSession;  // never destroyed (atexit order)
  return *session;
}

ElasticSession::ElasticSession()
    : enabled_(elastic_from_environment()), timeout_(timeout_from_environment()) {
  std::lock_guard<std::mutex> lock(mu_);
  round_ = round_from_environment();
}

int ElasticSession::round() const {
  std::lock_guard<std::mutex> lock(mu_);
  return round_;
}

void ElasticSession::announce(const rdv::wire::Reset& reset) {
  std::lock_guard<std::mutex> lock(mu_);
  if (newest_ && newest_->round >= reset.round) return;
  newest_ = reset;
  cv_.notify_all();
}

bool ElasticSession::reset_pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return newest_ && static_cast<int>(newest_->round) > round_;
}

std::optional<rdv::wire::Reset> ElasticSession::wait_for_newer(
    std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool newer = cv_.wait_until(lock, deadline, [&] {
    return newest_ && static_cast<int>(newest_->round) > round_;
  });
  if (!newer) return std::nullopt;
  return newest_;
}

void ElasticSession::adopt(const rdv::wire::Reset& reset) {
  std::lock_guard<std::mutex> lock(mu_);
  adopted_ = reset;
  round_ = static_cast<int>(reset.round);
}

EnvLookup ElasticSession::lookup(EnvLookup base) const {
  std::optional<rdv::wire::Reset> adopted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    adopted = adopted_;
  }
  if (!adopted) return base;
  // The strings live in the returned function (world_from_environment() reads them while it
  // holds the function).
  struct Values {
    std::string rank, size, local_rank, local_size, cross_rank, cross_size, host_index, rendezvous,
        round;
  };
  auto v = std::make_shared<Values>(
      Values{std::to_string(adopted->rank), std::to_string(adopted->size),
             std::to_string(adopted->local_rank), std::to_string(adopted->local_size),
             std::to_string(adopted->cross_rank), std::to_string(adopted->cross_size),
             std::to_string(adopted->host_index), adopted->rendezvous,
             std::to_string(adopted->round)});
  return [v, base = std::move(base)](const char* name) -> const char* {
    const std::string n = name;
    if (n == job_env::kRank) return v->rank.c_str();
    if (n == job_env::kSize) return v->size.c_str();
    if (n == job_env::kLocalRank) return v->local_rank.c_str();
    if (n == job_env::kLocalSize) return v->local_size.c_str();
    if (n == job_env::kCrossRank) return v->cross_rank.c_str();
    if (n == job_env::kCrossSize) return v->cross_size.c_str();
    if (n == job_env::kHostIndex) return v->host_index.c_str();
    if (n == job_env::kRendezvous) return v->rendezvous.c_str();
    if (n == job_env::kRound) return v->round.c_str();
    return base(name);
  };
}

}  // namespace hora::detail
