#include "cli/spawn/fixed_failure_policy.h"

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "cli/output/log.h"
#include "common/duration.h"
#include "rendezvous/wire.h"

namespace hora::cli {
namespace {

namespace asio = boost::asio;

// horarun's exit code when a host's agent ended the job (docs/errors.md), as for a lost link.
constexpr int kAgentFailureCode = 255;

}  // namespace

FixedFailurePolicy::FixedFailurePolicy(asio::io_context& io, Settings settings, Job job)
    : io_(io),
      settings_(settings),
      job_(std::move(job)),
      stall_(settings.stall),
      settle_timer_(io),
      await_timer_(io),
      start_timer_(io),
      stall_timer_(io) {}

void FixedFailurePolicy::start() {
  io_thread_.assert_held();
  arm_stall_check();
  start_timer_.expires_after(settings_.start_timeout);
  start_timer_.async_wait([this](const boost::system::error_code& ec) {
    io_thread_.assert_held();
    if (!ec) on_start_timeout();
  });
}

void FixedFailurePolicy::connected(int rank) {
  io_thread_.assert_held();
  verdict_.connected(rank);
}

void FixedFailurePolicy::disconnected(int rank, bool clean, const std::string& reason) {
  io_thread_.assert_held();
  if (rank < 0 || rank >= job_.size || job_.ending()) return;
  verdict_.left(rank, clean, clean && reason == rdv::wire::kGoodbyeAtExitReason);
  if (clean || !job_.running(rank)) return;
  launcher_log()->info("{} lost its rendezvous connection ({}); waiting {} for it to exit",
                       job_.who(rank), reason, hora::format_duration(settings_.drop_grace));
  auto& drop = drop_timers_[rank];
  drop = std::make_unique<asio::steady_timer>(io_, settings_.drop_grace);
  drop->async_wait([this, rank, reason](const boost::system::error_code& ec) {
    io_thread_.assert_held();
    if (ec || !job_.running(rank) || job_.ending()) return;
    job_.end_job(fmt::format("{} lost its rendezvous connection ({}) and was still running {} "
                             "later; treating it as failed",
                             job_.who(rank), reason, hora::format_duration(settings_.drop_grace)),
                 1);
  });
}

bool FixedFailurePolicy::running_others(int rank) const {
  for (int o = 0; o < job_.size; ++o) {
    if (o != rank && job_.running(o)) return true;
  }
  return false;
}

void FixedFailurePolicy::exited(int rank, const ExitStatus& status) {
  io_thread_.assert_held();
  const auto drop = drop_timers_.find(rank);
  if (drop != drop_timers_.end() && drop->second) drop->second->cancel();
  const bool ending = job_.ending();
  if (status.success() && !ending && !verdict_.has_early_exit() && running_others(rank)) {
    // Not a failure by itself (plain commands end at different times), but if the job fails
    // now, this rank is the likely cause: the others lost a peer.
    verdict_.exited_early(rank, job_.ranks_seen().count(rank) != 0);
  }
  if (!status.success() && !ending && verdict_.failed(rank, status)) {
    settle_timer_.expires_after(settings_.verdict_settle);
    settle_timer_.async_wait([this](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      if (ec) return;
      verdict_.settle();
      // Posted: events read in the same wake-up as the timer are handled first.
      asio::post(io_, [this] {
        io_thread_.assert_held();
        if (!cancelled_) decide();
      });
    });
  }
  decide();
}

void FixedFailurePolicy::decide() {
  if (job_.ending()) return;
  FailureVerdict::Ranks ranks;
  ranks.size = job_.size;
  ranks.running = job_.running;
  ranks.blamed_by = [this](int q) {
    io_thread_.assert_held();
    return blamed_by(q);
  };
  const FailureVerdict::Decision d = verdict_.decide(ranks);
  const FailureVerdict::Failure& f = d.cause;
  switch (d.kind) {
    case FailureVerdict::Decision::Kind::kNone: return;
    case FailureVerdict::Decision::Kind::kAwait:
      if (d.newly_awaited) await_rank(d.awaited, f, d.why);
      return;
    case FailureVerdict::Decision::Kind::kAgent:
      // A host's agent that ended (a signal, killed, silent) is the cause, not the ranks it took
      // with it nor the peers that lost them (docs/errors.md: 255).
      job_.end_job(fmt::format("{}; {} {} with it", f.status.agent_failure, job_.who(f.rank),
                               f.status.success() ? "ended" : f.status.describe()),
                   kAgentFailureCode);
      return;
    case FailureVerdict::Decision::Kind::kVerdict: end_with_verdict(f); return;
  }
}

void FixedFailurePolicy::end_with_verdict(const FailureVerdict::Failure& f) {
  // A rank that times out waiting usually waited for a peer that stopped: name that one.
  if (const auto stuck = stuck_rank(f.rank)) {
    job_.end_job(fmt::format("{} stopped responding ({}); {} then {}, most likely timing out "
                             "waiting for it",
                             job_.who(stuck->first), stuck->second.describe(), job_.who(f.rank),
                             f.status.describe()),
                 f.status.exit_code());
    return;
  }
  job_.end_job(fmt::format("{} {}{}", job_.who(f.rank), f.status.describe(),
                           verdict_.early_exit_note(f.rank, !job_.ranks_seen().empty(), job_.who)),
               f.status.exit_code());
}

void FixedFailurePolicy::await_rank(int rank, const FailureVerdict::Failure& cause,
                                    const std::string& why) {
  launcher_log()->info("{} {}; waiting for {}, which {}", job_.who(cause.rank),
                       cause.status.describe(), job_.who(rank), why);
  await_timer_.expires_after(settings_.drop_grace);
  await_timer_.async_wait([this, rank](const boost::system::error_code& ec) {
    io_thread_.assert_held();
    if (ec || job_.ending()) return;
    verdict_.stop_awaiting(rank);
    decide();
  });
}

int FixedFailurePolicy::blamed_by(int rank) const {
  const std::optional<std::string> v = job_.rendezvous_value(rdv::wire::peer_lost_key(rank));
  if (!v || v->empty() || v->size() > 9 ||
      v->find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  const int b = std::stoi(*v);
  return b < job_.size && b != rank ? b : -1;
}

// Every running rank whose process is stuck, by rank (one pass over /proc).
std::map<int, StuckProcess> FixedFailurePolicy::stuck_ranks() const {
  std::vector<int> live;
  for (int r = 0; r < job_.size; ++r) {
    if (job_.running(r)) live.push_back(r);
  }
  return job_.stuck(live);
}

// A running rank other than `except` whose process is stopped or traced, or in uninterruptible
// sleep since an earlier look of the stall check (a moment of D is only disk I/O).
std::optional<std::pair<int, StuckProcess>> FixedFailurePolicy::stuck_rank(int except) const {
  for (const auto& [r, p] : stuck_ranks()) {
    if (r != except && (p.state != 'D' || stall_.stuck_before(r))) return std::make_pair(r, p);
  }
  return std::nullopt;
}

// Once a second, every rank's processes are looked at (stall_watch.h). Remote ranks are looked
// at by their host's agent, which reports a change of state in a STATE frame (docs/agent.md).
void FixedFailurePolicy::arm_stall_check() {
  if (!settings_.stall.enabled) return;
  stall_timer_.expires_after(std::chrono::seconds(1));
  stall_timer_.async_wait([this](const boost::system::error_code& ec) {
    io_thread_.assert_held();
    if (ec || cancelled_ || job_.ending()) return;
    const StallWatch::Findings found =
        stall_.look(StallWatch::Clock::now(), stuck_ranks(), job_.who);
    for (const std::string& line : found.warnings) launcher_log()->warn("{}", line);
    if (found.shutdown) {
      job_.end_job(*found.shutdown, 1);
      return;
    }
    arm_stall_check();
  });
}

void FixedFailurePolicy::on_start_timeout() {
  if (job_.ending()) return;
  std::vector<int> live;
  for (int r = 0; r < job_.size; ++r) {
    if (job_.running(r)) live.push_back(r);
  }
  const StartTimeoutFinding found =
      start_timeout_finding(job_.ranks_seen(), live, job_.size, settings_.start_timeout, job_.who);
  if (!found.not_enforced.empty()) launcher_log()->info("{}", found.not_enforced);
  if (!found.failure.empty()) job_.end_job(found.failure, 1);
}

void FixedFailurePolicy::cancel() {
  io_thread_.assert_held();
  cancelled_ = true;
  settle_timer_.cancel();
  await_timer_.cancel();
  start_timer_.cancel();
  stall_timer_.cancel();
  for (auto& [rank, timer] : drop_timers_) {
    if (timer) timer->cancel();
  }
}

}  // namespace hora::cli
