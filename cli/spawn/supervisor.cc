#include "cli/spawn/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cli/agent/process_state.h"
#include "cli/base/errors.h"
#include "cli/output/log.h"
#include "cli/spawn/failure_verdict.h"
#include "cli/spawn/horovod_rendezvous.h"
#include "cli/spawn/rank_processes.h"
#include "cli/spawn/stall_watch.h"
#include "common/duration.h"
#include "common/endpoint.h"
#include "common/log_throttle.h"
#include "common/text.h"
#include "common/thread_annotations.h"
#include "rendezvous/errors.h"
#include "rendezvous/secret.h"
#include "rendezvous/server.h"
#include "rendezvous/wire.h"

namespace hora::cli {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// A port that is free on `address` right now (torch.distributed binds MASTER_PORT on rank 0;
// hora itself never uses it). Someone else may take it before the rank does; that is the same
// contract torchrun offers.
std::uint16_t free_port(asio::io_context& io, const std::string& address) {
  asio::ip::tcp::acceptor acceptor(io);
  const asio::ip::tcp::endpoint ep(asio::ip::make_address(address), 0);
  acceptor.open(ep.protocol());
  // Asio opens sockets without SOCK_CLOEXEC; this one is closed before any guard starts, but
  // every descriptor horarun opens is close-on-exec, so no rank or guard inherits one.
  ::fcntl(acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
  acceptor.bind(ep);
  return acceptor.local_endpoint().port();
}

// "fe80::1" -> "[fe80::1]" for host:port; other addresses unchanged.
std::string bracketed(const std::string& address) {
  return address.find(':') != std::string::npos ? fmt::format("[{}]", address) : address;
}

// A second SIGINT/SIGTERM at least this long after the first kills every rank at once.
constexpr std::chrono::milliseconds kRepeatedSignal{1000};

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

// horarun's exit code when a host's agent ended the job (docs/errors.md), as for a lost link.
constexpr int kAgentFailureCode = 255;

}  // namespace

struct Supervisor::Impl {
  // Every member but the references and the logger is the io thread's (the one that calls
  // run()): handlers assert it, methods require it (common/thread_annotations.h).
  hora::ThreadRole io_thread_;

  asio::io_context& io;
  const RankTable& table;
  SupervisorConfig config;
  RankProcessFactory& factory;
  Output& output;
  std::shared_ptr<spdlog::logger> log = launcher_log();

  std::unique_ptr<rdv::Server> server HORA_GUARDED_BY(io_thread_);
  std::unique_ptr<HorovodRendezvous> horovod
      HORA_GUARDED_BY(io_thread_);  // Horovod's HTTP rendezvous (on by default)
  // The ranks' processes: started, relayed, ended and killed after the graces (rank_processes.h).
  RankProcesses procs;
  // Per rank: its drop grace, from a rendezvous connection lost without goodbye to its exit.
  std::vector<std::unique_ptr<asio::steady_timer>> drop_timers HORA_GUARDED_BY(io_thread_);
  asio::signal_set signals HORA_GUARDED_BY(io_thread_){io, SIGINT, SIGTERM};
  asio::steady_timer start_timer HORA_GUARDED_BY(io_thread_){io};
  asio::steady_timer stall_timer HORA_GUARDED_BY(io_thread_){
      io};  // the launcher's stall check of local ranks
  // The launcher's stall check of local ranks (stall_watch.h).
  StallWatch stall HORA_GUARDED_BY(io_thread_){config.stall};
  hora::LogThrottle throttle
      HORA_GUARDED_BY(io_thread_);  // repeated rejection warnings: one line per host per second
  asio::steady_timer throttle_timer HORA_GUARDED_BY(io_thread_){io};
  bool throttle_armed HORA_GUARDED_BY(io_thread_) = false;
  bool ending HORA_GUARDED_BY(io_thread_) = false;
  // Who caused a failure (failure_verdict.h): what the rendezvous and the exits said, in the
  // order heard. Its verdict waits a moment (config.verdict_settle) while other ranks still run.
  FailureVerdict verdict HORA_GUARDED_BY(io_thread_);
  asio::steady_timer settle_timer HORA_GUARDED_BY(io_thread_){io};
  // Bounds the wait for a rank the verdict awaits (drop_grace).
  asio::steady_timer await_timer HORA_GUARDED_BY(io_thread_){io};
  bool finished HORA_GUARDED_BY(io_thread_) = false;
  std::string cause HORA_GUARDED_BY(io_thread_);  // printed at the end; empty on success
  int exit_code HORA_GUARDED_BY(io_thread_) = 0;
  std::optional<Clock::time_point> first_signal HORA_GUARDED_BY(io_thread_);

  Impl(asio::io_context& io_, const RankTable& table_, SupervisorConfig config_,
       RankProcessFactory& factory_, Output& output_)
      : io(io_),
        table(table_),
        config(std::move(config_)),
        factory(factory_),
        output(output_),
        procs(io_, output_,
              ProcessGraces{config.abort_grace, config.kill_grace, config.guard_slack,
                            config.drain_timeout},
              RankProcesses::Hooks{[this](int r) { return who(r); },
                                   [this](int r, const ExitStatus& st) {
                                     io_thread_.assert_held();
                                     on_exit(r, st);
                                   },
                                   [this] {
                                     io_thread_.assert_held();
                                     maybe_finish();
                                   }}) {
    drop_timers.resize(static_cast<std::size_t>(table.size()));
  }

  std::string who(int r) const { return rank_name(r, table.host_of(r).address_for_display()); }

  bool running(int r) const { return procs.running(r); }

  // The ranks that reached hora's rendezvous (hora::init()) or Horovod's (hvd.init()).
  std::set<int> ranks_seen() const HORA_REQUIRES(io_thread_) {
    std::set<int> seen = server ? server->ranks_seen() : std::set<int>{};
    if (horovod) seen.insert(horovod->ranks_seen().begin(), horovod->ranks_seen().end());
    return seen;
  }

  // ---- start ---------------------------------------------------------------------------

  void start_server(const rdv::Secret& secret) HORA_REQUIRES(io_thread_) {
    rdv::ServerOptions options;
    options.bind_address = config.bind_address;
    options.port = 0;
    options.size = table.size();
    options.secret = secret;
    // A rank that connected answers the server's challenge at once unless the machine is
    // swamped (128 ranks starting on 2 busy cores under a sanitizer took over 10 s): it gets as
    // long as it had to start, --start-timeout. Junk connections stay bounded by
    // max_unauthenticated, not by this wait.
    options.auth_timeout =
        std::max<std::chrono::milliseconds>(rdv::ServerOptions::kDefaultAuthTimeout,
                                            config.facts.start_timeout);
    rdv::ServerEvents events;
    events.on_connected = [this](int rank, const std::string& peer) {
      io_thread_.assert_held();
      log->info("rank {} reached the rendezvous from {}", rank, peer);
      verdict.connected(rank);
    };
    events.on_disconnected = [this](int rank, bool clean, const std::string& reason) {
      io_thread_.assert_held();
      on_disconnected(rank, clean, reason);
    };
    events.on_rejected = [this](const std::string& peer, const std::string& reason) {
      io_thread_.assert_held();
      on_rejected(peer, reason);
    };
    try {
      server = std::make_unique<rdv::Server>(io, options, std::move(events));
    } catch (const rdv::Error& e) {
      throw Error(fmt::format("cannot start the rendezvous server on {}: {}", config.bind_address,
                              e.what()));
    }
  }

  void launch() HORA_REQUIRES(io_thread_) {
    const rdv::Secret secret = rdv::generate_secret();
    start_server(secret);
    JobFacts facts = config.facts;
    if (config.horovod_rendezvous) {
      horovod = std::make_unique<HorovodRendezvous>(io, table, config);
      facts.horovod_addr = config.bind_address;
      facts.horovod_port = horovod->port();
    }
    facts.rendezvous = fmt::format("{}:{}", bracketed(config.bind_address), server->port());
    facts.iface = config.iface;
    facts.nccl_ifnames = config.nccl_ifnames;
    facts.master_addr = config.master_addr;
    facts.master_port =
        free_port(io, config.master_port_probe_address.empty() ? config.master_addr
                                                               : config.master_port_probe_address);
    facts.secret_hex = rdv::secret_to_hex(secret);
    // The server logs "rendezvous server listening on ADDRESS:PORT" itself (--verbose).

    signals.async_wait([this](const boost::system::error_code& ec, int sig) {
      io_thread_.assert_held();
      if (!ec) on_signal(sig);
    });

    for (int r = 0; r < table.size(); ++r) {
      if (ending) break;  // a signal or an earlier spawn failure
      GuardRequest request;
      request.cwd = config.cwd;
      if (!config.host_network.empty()) {
        const HostNetwork& net =
            config.host_network.at(static_cast<std::size_t>(table.rank(r).host_index));
        facts.rendezvous = fmt::format("{}:{}", bracketed(net.rendezvous_host), server->port());
        facts.horovod_addr = net.rendezvous_host;
        facts.iface = net.iface;
        facts.nccl_ifnames = net.nccl_ifnames;
      }
      request.env = rank_environment(table, r, facts);
      request.argv = config.command;
      request.grace = config.kill_grace;
      try {
        procs.start(r, factory.create(r, table.host_of(r)), request, r);
        log->info("started {}", who(r));
      } catch (const std::exception& e) {
        // A guard that was spawned before the failure is not started: the RankProcess's
        // destructor kills it when the supervisor goes away.
        end_job(fmt::format("could not start {}: {}", who(r), e.what()), 1);
      }
    }

    arm_stall_check();
    start_timer.expires_after(config.facts.start_timeout);
    start_timer.async_wait([this](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      if (!ec) on_start_timeout();
    });
    maybe_finish();
  }

  // ---- events --------------------------------------------------------------------------

  // Called by procs once r's exit is recorded.
  void on_exit(int r, const ExitStatus& status) HORA_REQUIRES(io_thread_) {
    if (const auto& drop = drop_timers.at(static_cast<std::size_t>(r))) drop->cancel();
    log->info("{} {}", who(r), status.describe());
    if (status.success() && !ending && !verdict.has_early_exit()) {
      for (int o = 0; o < table.size(); ++o) {
        if (o != r && running(o)) {
          // Not a failure by itself (plain commands end at different times), but if the job
          // fails now, this rank is the likely cause: the others lost a peer.
          verdict.exited_early(r, ranks_seen().count(r) != 0);
          break;
        }
      }
    }
    if (!status.success() && !ending && verdict.failed(r, status)) {
      settle_timer.expires_after(config.verdict_settle);
      settle_timer.async_wait([this](const boost::system::error_code& ec) {
        io_thread_.assert_held();
        if (ec) return;
        verdict.settle();
        // Posted: events read in the same wake-up as the timer are handled first.
        asio::post(io, [this] {
          io_thread_.assert_held();
          decide();
        });
      });
    }
    decide();
    maybe_finish();
  }

  // A running local rank other than `except` whose process is stopped or traced, or in
  // uninterruptible sleep since an earlier look of the stall check (a moment of D is only disk
  // I/O) (process_state.h), with what the kernel says; nullopt if none.
  std::optional<std::pair<int, StuckProcess>> stuck_rank(int except) HORA_REQUIRES(io_thread_) {
    const auto stuck = stuck_ranks();
    for (const auto& [r, p] : stuck) {
      if (r != except && (p.state != 'D' || stall.stuck_before(r))) {
        return std::make_pair(r, p);
      }
    }
    return std::nullopt;
  }

  // Every running local rank whose process is stuck, by rank (one pass over /proc).
  std::map<int, StuckProcess> stuck_ranks() const {
    std::vector<int> live;
    for (int r = 0; r < table.size(); ++r) {
      if (running(r)) live.push_back(r);
    }
    return procs.stuck(live);
  }

  // The launcher's half of the stall check: once a second, every local rank's processes are
  // looked at; one stopped, traced or in D for the stall warning time (HORA_STALL_CHECK_SECONDS,
  // 60 s) is named in a warning, and for the shutdown time (HORA_STALL_SHUTDOWN_SECONDS, when
  // above 0) it ends the job. Remote ranks are looked at by their host's agent, which reports a
  // change of state in a STATE frame (docs/agent.md).
  void arm_stall_check() HORA_REQUIRES(io_thread_) {
    if (!config.stall.enabled) return;
    stall_timer.expires_after(std::chrono::seconds(1));
    stall_timer.async_wait([this](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      if (ec || ending || finished) return;
      check_stalls();
      if (!ending) arm_stall_check();
    });
  }

  void check_stalls() HORA_REQUIRES(io_thread_) {
    const StallWatch::Findings found =
        stall.look(Clock::now(), stuck_ranks(), [this](int r) { return who(r); });
    for (const std::string& line : found.warnings) log->warn("{}", line);
    if (found.shutdown) end_job(*found.shutdown, 1);
  }

  // The rank `r` blames for its failure (its first PeerFailure's peer, stored at the
  // rendezvous), or -1.
  int blamed_by(int r) const HORA_REQUIRES(io_thread_) {
    if (!server) return -1;
    const std::optional<std::string> v = server->value(rdv::wire::peer_lost_key(r));
    if (!v || v->empty() || v->size() > 9 ||
        v->find_first_not_of("0123456789") != std::string::npos) {
      return -1;
    }
    const int b = std::stoi(*v);
    return b < table.size() && b != r ? b : -1;
  }

  // The verdict on the failures heard (failure_verdict.h), once verdict_settle has passed or no
  // other rank runs; a rank it awaits gets drop_grace at most to exit.
  void decide() HORA_REQUIRES(io_thread_) {
    if (ending) return;
    FailureVerdict::Ranks ranks;
    ranks.size = table.size();
    ranks.running = [this](int q) {
      io_thread_.assert_held();
      return running(q);
    };
    ranks.blamed_by = [this](int q) {
      io_thread_.assert_held();
      return blamed_by(q);
    };
    const FailureVerdict::Decision d = verdict.decide(ranks);
    const FailureVerdict::Failure& f = d.cause;
    switch (d.kind) {
      case FailureVerdict::Decision::Kind::kNone: return;
      case FailureVerdict::Decision::Kind::kAwait:
        if (d.newly_awaited) await_rank(d.awaited, f, d.why);
        return;
      case FailureVerdict::Decision::Kind::kAgent:
        // A host's agent that ended (a signal, killed, silent) is the cause, not the ranks it
        // took with it nor the peers that lost them (docs/errors.md: 255).
        end_job(fmt::format("{}; {} {} with it", f.status.agent_failure, who(f.rank),
                            f.status.success() ? "ended" : f.status.describe()),
                kAgentFailureCode);
        return;
      case FailureVerdict::Decision::Kind::kVerdict: break;
    }
    // A rank that times out waiting usually waited for a peer that stopped: name that one.
    if (const auto stuck = stuck_rank(f.rank)) {
      end_job(fmt::format("{} stopped responding ({}); {} then {}, most likely timing out "
                          "waiting for it",
                          who(stuck->first), stuck->second.describe(), who(f.rank),
                          f.status.describe()),
              f.status.exit_code());
    } else {
      end_job(fmt::format("{} {}{}", who(f.rank), f.status.describe(),
                          verdict.early_exit_note(f.rank, !ranks_seen().empty(),
                                                  [this](int q) { return who(q); })),
              f.status.exit_code());
    }
  }

  // Waits (drop_grace at most) for running rank q's exit before the verdict on `cause`.
  void await_rank(int q, const FailureVerdict::Failure& cause, const std::string& why)
      HORA_REQUIRES(io_thread_) {
    log->info("{} {}; waiting for {}, which {}", who(cause.rank), cause.status.describe(), who(q),
              why);
    await_timer.expires_after(config.drop_grace);
    await_timer.async_wait([this, q](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      if (ec || ending) return;
      verdict.stop_awaiting(q);
      decide();
    });
  }

  void on_disconnected(int r, bool clean, const std::string& reason) HORA_REQUIRES(io_thread_) {
    if (r < 0 || r >= table.size() || ending) return;
    verdict.left(r, clean, clean && reason == rdv::wire::kGoodbyeAtExitReason);
    if (clean || !running(r)) return;
    log->info("{} lost its rendezvous connection ({}); waiting {} for it to exit", who(r), reason,
              hora::format_duration(config.drop_grace));
    auto& drop = drop_timers.at(static_cast<std::size_t>(r));
    drop = std::make_unique<asio::steady_timer>(io, config.drop_grace);
    drop->async_wait([this, r, reason](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      if (ec || !running(r) || ending) return;
      end_job(fmt::format("{} lost its rendezvous connection ({}) and was still running {} "
                          "later; treating it as failed",
                          who(r), reason, hora::format_duration(config.drop_grace)),
              1);
    });
  }

  // A flood of junk connections costs one line per host per second, with a count.
  void on_rejected(const std::string& peer, const std::string& reason) HORA_REQUIRES(io_thread_) {
    const std::string host = hora::endpoint_host(peer);
    if (throttle.admit("rejected " + host, Clock::now(), [host](std::uint64_t n) {
          return fmt::format("rejected {} more rendezvous connections from {} in the last 1 s", n,
                             host);
        })) {
      log->warn("rejected a rendezvous connection from {}: {}", peer, reason);
    }
    arm_throttle();
  }

  // Summaries of throttled warnings are written when their window ends.
  void arm_throttle() HORA_REQUIRES(io_thread_) {
    const auto next = throttle.next_flush();
    if (throttle_armed || !next) return;
    throttle_armed = true;
    throttle_timer.expires_at(*next);
    throttle_timer.async_wait([this](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      throttle_armed = false;
      if (ec) return;
      for (const std::string& line : throttle.flush(Clock::now())) log->warn("{}", line);
      arm_throttle();
    });
  }

  void on_start_timeout() HORA_REQUIRES(io_thread_) {
    if (ending) return;
    std::vector<int> live;
    for (int r = 0; r < table.size(); ++r) {
      if (running(r)) live.push_back(r);
    }
    const StartTimeoutFinding found =
        start_timeout_finding(ranks_seen(), live, table.size(), config.facts.start_timeout,
                              [this](int r) { return who(r); });
    if (!found.not_enforced.empty()) log->info("{}", found.not_enforced);
    if (!found.failure.empty()) end_job(found.failure, 1);
  }

  void on_signal(int sig) HORA_REQUIRES(io_thread_) {
    const auto now = Clock::now();
    if (!ending) {
      first_signal = now;
      end_job(fmt::format("interrupted by {}; ended the job", signal_name(sig)), 128 + sig);
    } else if (first_signal && now - *first_signal < kRepeatedSignal) {
      // The same interrupt delivered twice (e.g. `timeout` signals its child and then its
      // process group); only a deliberate second interrupt skips the grace periods.
    } else {
      // Again, or the first one while the job was already ending (a failure).
      log->warn("{}{}: killing every rank now", signal_name(sig), first_signal ? " again" : "");
      kill_all();
    }
    signals.async_wait([this](const boost::system::error_code& ec, int s) {
      io_thread_.assert_held();
      if (!ec) on_signal(s);
    });
  }

  // ---- ending --------------------------------------------------------------------------

  void end_job(std::string reason, int code) HORA_REQUIRES(io_thread_) {
    if (ending) return;
    ending = true;
    cause = std::move(reason);
    exit_code = code;
    start_timer.cancel();
    log->info("ending the job: {}", cause);
    if (server) server->abort_all(cause);
    // Ranks connected to the rendezvous get the abort notice and abort_grace to exit by
    // themselves (printing why); the others cannot hear it and are terminated now.
    const std::set<int> connected = server ? server->ranks_connected() : std::set<int>{};
    procs.end_all(connected, config.abort_grace);
    maybe_finish();
  }

  void kill_all() { procs.kill_all(); }

  void maybe_finish() HORA_REQUIRES(io_thread_) {
    if (finished) return;
    // Ranks not started yet (still spawning in launch()) keep the job alive.
    if (!ending) {
      for (int r = 0; r < table.size(); ++r) {
        if (!procs.started(r)) return;
      }
    }
    if (!procs.exited_and_drained()) return;
    finished = true;
    start_timer.cancel();
    procs.cancel_timers();
    settle_timer.cancel();
    await_timer.cancel();
    throttle_timer.cancel();
    stall_timer.cancel();
    boost::system::error_code ignored;
    signals.cancel(ignored);
    if (server) server->stop();
    if (horovod) horovod->stop();
    io.stop();
  }

  int run() HORA_REQUIRES(io_thread_) {
    launch();
    if (!finished) io.run();
    if (!cause.empty()) output.launcher_message(cause);
    return exit_code;
  }
};

Supervisor::Supervisor(boost::asio::io_context& io, const RankTable& table, SupervisorConfig config,
                       RankProcessFactory& factory, Output& output)
    : impl_(std::make_unique<Impl>(io, table, std::move(config), factory, output)) {}

Supervisor::~Supervisor() = default;

int Supervisor::run() {
  impl_->io_thread_.assert_held();  // run()'s caller's thread is the io thread from now on
  return impl_->run();
}

const std::string& Supervisor::cause() const { return impl_->cause; }

}  // namespace hora::cli
