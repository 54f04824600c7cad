#include "cli/elastic/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cli/agent/process_state.h"
#include "cli/base/errors.h"
#include "cli/elastic/blacklist.h"
#include "cli/elastic/discovery_script.h"
#include "cli/elastic/horovod_elastic.h"
#include "cli/elastic/round_plan.h"
#include "cli/hosts/rank_table.h"
#include "cli/output/log.h"
#include "cli/spawn/fixed_failure_policy.h"
#include "cli/spawn/horovod_rendezvous.h"
#include "cli/spawn/rank_environment.h"
#include "cli/spawn/rank_processes.h"
#include "common/duration.h"
#include "common/endpoint.h"
#include "common/job_environment.h"
#include "common/log_throttle.h"
#include "common/text.h"
#include "common/thread_annotations.h"
#include "rendezvous/errors.h"
#include "rendezvous/hmac.h"
#include "rendezvous/secret.h"
#include "rendezvous/server.h"
#include "rendezvous/wire.h"

namespace hora::cli {
namespace {

// A worker stopped or traced this long is named (looked at once a second: within 3 s).
constexpr std::chrono::seconds kStoppedNamedAfter{2};

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

std::string bracketed(const std::string& address) {
  return address.find(':') != std::string::npos ? fmt::format("[{}]", address) : address;
}

std::string seconds_text(Clock::duration d) {
  return fmt::format("{:.2f} s", std::chrono::duration<double>(d).count());
}

// How much longer than --elastic-timeout a rank waits for the next round (HORA_ELASTIC_TIMEOUT).
constexpr std::chrono::seconds kRankWaitMargin{60};

// How long one run of the discovery script may take.
constexpr std::chrono::seconds kDiscoveryDeadline{10};

// How often a round that has not formed yet looks at the states of the workers it waits for.
constexpr std::chrono::seconds kFormationLook{1};

bool is_wildcard(const std::string& address) { return address == "0.0.0.0" || address == "::"; }

// A second SIGINT/SIGTERM at least this long after the first kills every rank at once.
constexpr std::chrono::milliseconds kRepeatedSignal{1000};

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

// A fixed-size job's hosts: every one prepared by the launch, its ranks' processes from the
// launch's factory, each host's network as the launch chose it.
class FixedHosts : public ElasticHosts {
 public:
  FixedHosts(const RankTable& table, const SupervisorConfig& config, RankProcessFactory& factory)
      : hosts_(table.hosts()),
        networks_(config.host_network),
        all_local_{config.bind_address, config.iface, config.nccl_ifnames},
        factory_(factory) {}
  bool prepared(const std::string&) const override { return true; }
  void prepare(const std::vector<HostSpec>& hosts,
               std::function<void(const std::string&, const std::string&)> done) override {
    for (const HostSpec& h : hosts) done(h.name, "a fixed-size job takes no new host");
  }
  std::unique_ptr<RankProcess> create(int worker, const HostSpec& host) override {
    return factory_.create(worker, host);
  }
  // By host index: SupervisorConfig::host_network, or every rank's when it is empty.
  HostNetwork network(std::size_t host_index) const {
    return networks_.empty() ? all_local_ : networks_.at(host_index);
  }
  HostNetwork network(const std::string& host) const override {
    for (std::size_t i = 0; i < hosts_.size(); ++i) {
      if (hosts_[i].name == host) return network(i);
    }
    return all_local_;
  }
  bool is_this_machine(const HostSpec&) override { return false; }

 private:
  const std::vector<HostSpec> hosts_;
  const std::vector<HostNetwork> networks_;
  const HostNetwork all_local_;
  RankProcessFactory& factory_;
};

// A fixed-size job's one round: the rank table's ranks, every one a new worker whose id is its
// rank.
RoundPlan fixed_plan(const RankTable& table) {
  RoundPlan plan;
  plan.hosts = table.hosts();
  for (int r = 0; r < table.size(); ++r) {
    PlannedRank p;
    p.info = table.rank(r);
    p.worker_id = r;
    p.is_new = true;
    p.local_slot = p.info.local_rank;
    plan.ranks.push_back(p);
    plan.started.push_back(r);
  }
  plan.size = table.size();
  plan.enough = true;
  return plan;
}

}  // namespace

struct Supervisor::Impl {
  // Every member but the references, the configuration, the secret, the logger and procs (which
  // asserts the role itself) is the io thread's (the one that calls run()): handlers assert it,
  // methods require it (common/thread_annotations.h). The discovery script and the preparation
  // of new hosts run on other threads and post their answers to it.
  hora::ThreadRole io_thread_;
  struct Worker {
    int id = 0;
    HostSpec host;  // as listed (its slots are the host's)
    int slot = 0;
    bool stopping = false;       // we asked it to end: its exit is not a failure
    std::map<int, int> rank_in;  // round -> its rank in that round
    int connected_round = -1;    // the newest round it reached the rendezvous of
    int horovod_round = -1;      // the round whose numbers its Horovod environment holds
    // Its drop grace, from a rendezvous connection lost without goodbye to its exit.
    std::unique_ptr<asio::steady_timer> drop_timer;
  };
  struct Round {
    int number = 0;
    // Its rendezvous; stopped (reset) once a newer round has formed: every worker of that round
    // reached it, so no worker needs this one's RESET any more.
    std::unique_ptr<rdv::Server> server;
    std::string bind_address;  // what `server` listens on (round_bind_address())
    RoundPlan plan;
    Clock::time_point event;  // what started it
    Clock::time_point began;
    std::string reason;
    std::set<int> connected;  // ranks of this round at its rendezvous
    bool formed = false;
    // While it forms: looks once a second at the workers it waits for (a stopped one is named
    // at once), and ends the wait at --elastic-timeout.
    std::unique_ptr<asio::steady_timer> formation_timer;
    std::set<int> named_stuck;  // worker ids already warned about
  };

  asio::io_context& io;
  ElasticConfig config;
  ElasticHosts& hosts;
  Output& output;
  // A fixed-size job's rank table (its one round); null for an elastic job.
  const RankTable* const fixed_table;
  std::shared_ptr<spdlog::logger> log = launcher_log();

  const rdv::Secret secret = rdv::generate_secret();
  std::map<int, Worker> workers HORA_GUARDED_BY(io_thread_);
  // The workers' processes by worker id: started, relayed, ended and killed after the graces
  // (cli/spawn/rank_processes.h).
  RankProcesses procs;
  std::map<int, Round> rounds HORA_GUARDED_BY(io_thread_);
  int current HORA_GUARDED_BY(io_thread_) = -1;  // the newest round
  int next_worker_id HORA_GUARDED_BY(io_thread_) = 0;
  int resets HORA_GUARDED_BY(io_thread_) = 0;

  // Hosts: what discovery (or -H) lists now, in its order; blacklisted ones; ones being prepared.
  std::vector<HostSpec> listed HORA_GUARDED_BY(io_thread_);
  Blacklist blacklist HORA_GUARDED_BY(io_thread_);
  std::set<std::string> preparing HORA_GUARDED_BY(io_thread_);
  std::set<std::string> failed_prepare HORA_GUARDED_BY(io_thread_);
  std::set<std::string> second_names
      HORA_GUARDED_BY(io_thread_);  // this machine under another name: warned once each
  // Since when discovery has listed no host while workers run (a glitch until it lasts
  // --elastic-timeout; docs/elastic.md, "When discovery lists no host").
  std::optional<Clock::time_point> empty_since HORA_GUARDED_BY(io_thread_);

  asio::signal_set signals HORA_GUARDED_BY(io_thread_){io, SIGINT, SIGTERM};
  asio::steady_timer discovery_timer HORA_GUARDED_BY(io_thread_){io};
  asio::steady_timer settle_timer HORA_GUARDED_BY(io_thread_){io};
  asio::steady_timer wait_timer HORA_GUARDED_BY(io_thread_){
      io};  // below --min-np: the end of --elastic-timeout
  asio::steady_timer cooldown_timer HORA_GUARDED_BY(io_thread_){
      io};  // the next end of a blacklisted host's cooldown
  // Once a second while the job runs: workers stopped or held by a debugger (stopped_look).
  asio::steady_timer stopped_timer HORA_GUARDED_BY(io_thread_){io};
  std::map<int, Clock::time_point> stopped_since
      HORA_GUARDED_BY(io_thread_);                          // worker id -> first seen stopped
  std::set<int> stopped_named HORA_GUARDED_BY(io_thread_);  // named since it was last seen running
  std::thread discovery_thread HORA_GUARDED_BY(io_thread_);
  bool discovery_running HORA_GUARDED_BY(io_thread_) = false;
  std::string last_discovery_error HORA_GUARDED_BY(io_thread_);
  bool warned_discovery_leftovers HORA_GUARDED_BY(io_thread_) = false;

  // A reset is due (gathering events until settle_timer fires).
  bool reset_due HORA_GUARDED_BY(io_thread_) = false;
  bool reset_interrupt HORA_GUARDED_BY(io_thread_) = false;
  std::vector<std::string> reset_events HORA_GUARDED_BY(io_thread_);
  Clock::time_point reset_event_time HORA_GUARDED_BY(io_thread_);
  std::optional<Clock::time_point> waiting_since HORA_GUARDED_BY(io_thread_);  // below --min-np

  // A fixed-size job's: Horovod's Gloo HTTP rendezvous (on by default), and the fixed failure
  // policy, which decides what the ranks' events mean (cli/spawn/fixed_failure_policy.h).
  std::unique_ptr<HorovodRendezvous> horovod HORA_GUARDED_BY(io_thread_);
  std::unique_ptr<FixedFailurePolicy> policy HORA_GUARDED_BY(io_thread_);
  // An elastic job's: Horovod's elastic rendezvous, one server for the job's life
  // (cli/elastic/horovod_elastic.h); null with --no-horovod-rendezvous.
  std::unique_ptr<HorovodElastic> hvd HORA_GUARDED_BY(io_thread_);
  // Where this machine's workers reach it.
  std::string horovod_local_address HORA_GUARDED_BY(io_thread_);
  // The peer of a Horovod worker whose HTTP request ended the job (on_http_request).
  std::string http_peer HORA_GUARDED_BY(io_thread_);

  hora::LogThrottle throttle
      HORA_GUARDED_BY(io_thread_);  // repeated rejection warnings: one line per host per second
  asio::steady_timer throttle_timer HORA_GUARDED_BY(io_thread_){io};
  bool throttle_armed HORA_GUARDED_BY(io_thread_) = false;

  bool ending HORA_GUARDED_BY(io_thread_) = false;
  bool finished HORA_GUARDED_BY(io_thread_) = false;
  std::string cause HORA_GUARDED_BY(io_thread_);
  int exit_code HORA_GUARDED_BY(io_thread_) = 0;
  std::optional<int> first_failure_code HORA_GUARDED_BY(io_thread_);
  std::optional<Clock::time_point> first_signal HORA_GUARDED_BY(io_thread_);

  Impl(asio::io_context& io_, ElasticConfig config_, ElasticHosts& hosts_, Output& output_,
       const RankTable* fixed_table_ = nullptr)
      : io(io_),
        config(std::move(config_)),
        hosts(hosts_),
        output(output_),
        fixed_table(fixed_table_),
        procs(io_, output_,
              ProcessGraces{config.base.abort_grace, config.base.kill_grace,
                            config.base.guard_slack, config.base.drain_timeout},
              RankProcesses::Hooks{[this](int id) {
                                     io_thread_.assert_held();
                                     return who(workers.at(id));
                                   },
                                   [this](int id, const ExitStatus& st) {
                                     io_thread_.assert_held();
                                     on_exit(id, st);
                                   },
                                   [this] {
                                     io_thread_.assert_held();
                                     maybe_finish();
                                   }}),
        blacklist(config.options.blacklist_cooldown) {
    listed = config.hosts;
    if (fixed_table != nullptr) policy = make_policy();
  }

  std::string who(const Worker& w) const HORA_REQUIRES(io_thread_) {
    // A fixed-size job's ranks are named as ranks: their rank is their worker id.
    if (fixed_table != nullptr) return rank_name(w.id, w.host.address_for_display());
    const auto r = w.rank_in.find(current);
    if (r != w.rank_in.end()) {
      return fmt::format("worker {} (rank {}) on {}", w.id, r->second,
                         w.host.address_for_display());
    }
    return fmt::format("worker {} on {}", w.id, w.host.address_for_display());
  }

  bool running(const Worker& w) const HORA_REQUIRES(io_thread_) { return procs.running(w.id); }

  std::vector<int> running_ids() const HORA_REQUIRES(io_thread_) {
    std::vector<int> out;
    for (const auto& [id, w] : workers) {
      if (running(w)) out.push_back(id);
    }
    return out;
  }

  // ---- rounds ----------------------------------------------------------------------------

  // Hosts that can take workers now: listed, not blacklisted, prepared.
  std::vector<HostSpec> available_hosts(Clock::time_point now) const HORA_REQUIRES(io_thread_) {
    std::vector<HostSpec> out;
    for (const HostSpec& h : listed) {
      if (!blacklist.is_blacklisted(h.name, now) && hosts.prepared(h.name)) out.push_back(h);
    }
    return out;
  }

  // Starts agents on listed hosts that have none (and are not blacklisted).
  void prepare_new_hosts() HORA_REQUIRES(io_thread_) {
    const auto now = Clock::now();
    std::vector<HostSpec> todo;
    for (const HostSpec& h : listed) {
      if (hosts.prepared(h.name) || preparing.count(h.name) != 0 ||
          failed_prepare.count(h.name) != 0 || blacklist.is_blacklisted(h.name, now)) {
        continue;
      }
      preparing.insert(h.name);
      todo.push_back(h);
    }
    if (todo.empty()) return;
    std::vector<std::string> names;
    for (const HostSpec& h : todo) names.push_back(h.address_for_display());
    log->warn("elastic: found host{} {}; starting agent{}", todo.size() == 1 ? "" : "s",
              fmt::join(names, ", "), todo.size() == 1 ? "" : "s");
    hosts.prepare(todo, [this](const std::string& host, const std::string& error) {
      io_thread_.assert_held();
      preparing.erase(host);
      if (ending) return;
      if (!error.empty()) {
        failed_prepare.insert(host);
        log->warn("elastic: host {} cannot take workers: {}", host, error);
        return;
      }
      request_reset(fmt::format("host {} joined", host), false);
    });
  }

  void request_reset(std::string event, bool interrupt) HORA_REQUIRES(io_thread_) {
    if (ending) return;
    if (!reset_due) {
      reset_due = true;
      reset_event_time = Clock::now();
      settle_timer.expires_after(config.reset_settle);
      settle_timer.async_wait([this](const boost::system::error_code& ec) {
        io_thread_.assert_held();
        if (!ec)
          asio::post(io, [this] {
            io_thread_.assert_held();
            plan_next_round();
          });
      });
    }
    reset_interrupt = reset_interrupt || interrupt;
    if (std::find(reset_events.begin(), reset_events.end(), event) == reset_events.end()) {
      reset_events.push_back(std::move(event));
    }
    plan_when_settled();
  }

  // The next round is planned as soon as every worker being stopped has exited (a lost host's
  // other workers end within milliseconds of SIGTERM), and at the latest when reset_settle
  // passes.
  void plan_when_settled() HORA_REQUIRES(io_thread_) {
    if (!reset_due || ending) return;
    for (const auto& [id, w] : workers) {
      if (w.stopping && running(w)) return;
    }
    asio::post(io, [this] {
      io_thread_.assert_held();
      plan_next_round();
    });
  }

  void plan_next_round() HORA_REQUIRES(io_thread_) {
    if (ending || !reset_due) return;
    const auto now = Clock::now();
    RoundInput in;
    for (const auto& [id, w] : workers) {
      if (!running(w) || w.stopping) continue;
      const auto r = w.rank_in.find(current);
      in.workers.push_back(
          CurrentWorker{id, w.host.name, w.slot, r != w.rank_in.end() ? r->second : 1 << 30});
    }
    std::sort(in.workers.begin(), in.workers.end(),
              [](const CurrentWorker& a, const CurrentWorker& b) { return a.rank < b.rank; });
    in.hosts = available_hosts(now);
    in.blacklisted = blacklist.blacklisted(now);
    in.min_np = std::max(1, config.options.min_np);
    in.max_np = current < 0 ? std::optional<int>(config.np) : config.options.max_np;
    in.next_worker_id = next_worker_id;
    RoundPlan plan = plan_round(in);

    // A round that would change nothing (a host joined while the job is at --max-np).
    if (current >= 0 && plan.started.empty() && plan.stopped.empty() && !reset_interrupt &&
        plan.size == rounds.at(current).plan.size) {
      reset_due = false;
      reset_events.clear();
      return;
    }
    if (current >= 0 && plan.kept.empty()) {
      end_job(fmt::format("elastic: no worker of round {} is left to hand its state on ({}); "
                          "the job cannot go on",
                          current, fmt::join(reset_events, "; ")),
              first_failure_code.value_or(1));
      return;
    }
    if (!plan.enough) {
      wait_for_hosts(plan, now);
      return;
    }
    if (current >= 0 && config.options.reset_limit && resets >= *config.options.reset_limit) {
      end_job(fmt::format("elastic: the job needs reset {} ({}), past --reset-limit {}", resets + 1,
                          fmt::join(reset_events, "; "), *config.options.reset_limit),
              first_failure_code.value_or(1));
      return;
    }
    waiting_since.reset();
    wait_timer.cancel();
    begin_round(std::move(plan));
  }

  void wait_for_hosts(const RoundPlan& plan, Clock::time_point now) HORA_REQUIRES(io_thread_) {
    if (!waiting_since) {
      waiting_since = now;
      log->warn(
          "elastic: {}; {} slot{} available, --min-np is {}: waiting up to {} for hosts "
          "(--elastic-timeout)",
          fmt::join(reset_events, "; "), plan.size, plan.size == 1 ? "" : "s",
          config.options.min_np, hora::format_duration(config.options.elastic_timeout));
      wait_timer.expires_after(config.options.elastic_timeout);
      wait_timer.async_wait([this](const boost::system::error_code& ec) {
        io_thread_.assert_held();
        if (!ec && waiting_since) on_wait_timeout();
      });
    }
    // Discovery (or a cooldown) calls plan_next_round() again.
  }

  void on_wait_timeout() HORA_REQUIRES(io_thread_) {
    const auto now = Clock::now();
    std::vector<std::string> have;
    int slots = 0;
    for (const HostSpec& h : available_hosts(now)) {
      have.push_back(fmt::format("{}:{}", h.address_for_display(), h.slots));
      slots += h.slots;
    }
    const std::vector<std::string> black = blacklist.blacklisted(now);
    std::vector<std::string> unprepared;
    for (const std::string& h : failed_prepare) unprepared.push_back(h);
    end_job(fmt::format(
                "elastic: waited {} (--elastic-timeout) for --min-np {} slots; had {} "
                "({}){}{}; {}",
                hora::format_duration(config.options.elastic_timeout), config.options.min_np, slots,
                have.empty() ? "no host" : fmt::format("{}", fmt::join(have, ", ")),
                black.empty() ? "" : fmt::format("; blacklisted: {}", fmt::join(black, ", ")),
                unprepared.empty() ? ""
                                   : fmt::format("; unreachable: {}", fmt::join(unprepared, ", ")),
                config.options.discovery_script.empty()
                    ? "list more hosts with -H, or use --host-discovery-script"
                    : "the discovery script did not list enough hosts"),
            first_failure_code.value_or(1));
  }

  void begin_round(RoundPlan plan) HORA_REQUIRES(io_thread_) {
    const bool first = current < 0;
    const bool interrupt = reset_interrupt;
    const std::string reason = first ? "start" : fmt::format("{}", fmt::join(reset_events, "; "));
    const Clock::time_point event = first ? Clock::now() : reset_event_time;
    reset_due = false;
    reset_interrupt = false;
    reset_events.clear();
    if (!first) ++resets;
    const int number = current + 1;

    Round& round = rounds[number];
    round.number = number;
    round.plan = std::move(plan);
    round.event = event;
    round.reason = reason;
    current = number;
    round.began = Clock::now();
    start_server(round);
    if (hvd) hvd->begin_round(RankTable(round.plan.hosts, round.plan.size));
    if (!first) arm_formation_look(round);
    next_worker_id += static_cast<int>(round.plan.started.size());

    std::vector<std::string> host_text;
    for (const HostSpec& h : round.plan.hosts) {
      host_text.push_back(fmt::format("{}:{}", h.address_for_display(), h.slots));
    }
    if (first) {
      log->info("elastic: round 0: {} ranks on {}", round.plan.size, fmt::join(host_text, ", "));
    } else {
      log->warn("elastic: round {}: {}; new size {} on {}", number, reason, round.plan.size,
                fmt::join(host_text, ", "));
    }

    // Workers that do not stay are stopped; those that stay are told their new place.
    for (int id : round.plan.stopped) stop_worker(workers.at(id));
    for (int r = 0; r < round.plan.size; ++r) {
      const PlannedRank& p = round.plan.ranks[static_cast<std::size_t>(r)];
      if (p.is_new) {
        start_worker(round, p);
      } else {
        Worker& w = workers.at(p.worker_id);
        w.rank_in[number] = r;
        const rdv::wire::Reset reset = reset_for(round, r, w.host.name, interrupt);
        for (const auto& [k, old_rank] : w.rank_in) {
          if (k < number && rounds.count(k) != 0 && rounds.at(k).server) {
            rounds.at(k).server->reset_rank(old_rank, reset);
          }
        }
      }
    }
    if (hvd && !first) {
      if (!interrupt) horovod_notify(round);
      horovod_barrier();
    }
  }

  // ---- Horovod's elastic rendezvous (cli/elastic/horovod_elastic.h) ----------------------

  void start_horovod() HORA_REQUIRES(io_thread_) {
    // Opt-in (--horovod-elastic): with a discovery script the server listens on every address
    // without authentication (as horovodrun's), which a job of hora programs does not need.
    if (!config.base.horovod_rendezvous || !config.options.horovod) return;
    // One port for the job's life. Without a discovery script the hosts are known: a fixed
    // job's listen addresses and remote peers. With one, hosts found later may reach the
    // launcher at any address and from addresses nobody reported: every address, any peer
    // host, as horovodrun (peers on this machine must still be the job's user's).
    const bool discovery = !config.options.discovery_script.empty();
    std::vector<std::string> bind =
        discovery ? std::vector<std::string>{"0.0.0.0"} : horovod_listen_addresses(config.base);
    std::vector<std::string> remote =
        discovery ? std::vector<std::string>{} : config.base.remote_host_addresses;
    horovod_local_address = is_wildcard(bind.front()) ? "127.0.0.1" : bind.front();
    // Sizes the connection limits: the most ranks the job may have, or plenty without --max-np.
    const int most = config.options.max_np.value_or(std::max(config.np, 1024));
    HorovodElasticEvents events;
    events.on_joined = [this](int rank, const std::string& peer) {
      io_thread_.assert_held();
      if (ending || current < 0) return;
      log->info("rank {} of round {} reached Horovod's rendezvous from {}", rank, current, peer);
      on_connected(current, rank, peer);
    };
    events.on_held = [this](const std::string&) {
      io_thread_.assert_held();
      horovod_barrier();
    };
    hvd = std::make_unique<HorovodElastic>(io, std::move(bind), std::move(remote), most,
                                           std::move(events));
  }

  // Horovod's barrier: the held GET /rank_and_size of the current round's survivors are
  // answered once every one of them asked; their Gloo init then starts together.
  void horovod_barrier() HORA_REQUIRES(io_thread_) {
    if (!hvd || current < 0 || ending) return;
    const Round& rd = rounds.at(current);
    std::vector<Worker*> behind;
    for (const PlannedRank& p : rd.plan.ranks) {
      if (p.is_new) continue;
      Worker& w = workers.at(p.worker_id);
      if (w.horovod_round >= current || !running(w) || w.stopping) continue;
      // A kept worker's local rank is its slot (round_plan.h), in every round.
      if (!hvd->held(horovod_slot(w.host.name, w.slot))) return;
      behind.push_back(&w);
    }
    for (Worker* w : behind) {
      hvd->release(horovod_slot(w->host.name, w->slot));
      w->horovod_round = current;
    }
    if (!behind.empty()) {
      log->info("elastic: round {}: {} Horovod survivor{} released from the barrier", current,
                behind.size(), behind.size() == 1 ? "" : "s");
    }
  }

  // A round that did not interrupt: rank 0 of the round before hears that hosts changed and
  // every rank resets at its next commit (horovodrun's driver does the same).
  void horovod_notify(const Round& round) HORA_REQUIRES(io_thread_) {
    Worker* w = worker_of(round.number - 1, 0);
    if (w == nullptr || !running(*w) || w->stopping) return;
    const rdv::horovod::HostUpdate what =
        round.plan.started.empty()   ? rdv::horovod::HostUpdate::kRemoved
        : round.plan.stopped.empty() ? rdv::horovod::HostUpdate::kAdded
                                     : rdv::horovod::HostUpdate::kMixed;
    const std::string known = hosts.network(w->host.name).rendezvous_host;
    hvd->notify(horovod_slot(w->host.name, w->slot), what, known, known.empty());
  }

  rdv::wire::Reset reset_for(const Round& round, int r, const std::string& host, bool interrupt)
      HORA_REQUIRES(io_thread_) {
    const RankInfo& info = round.plan.ranks[static_cast<std::size_t>(r)].info;
    rdv::wire::Reset reset;
    reset.round = static_cast<std::uint32_t>(round.number);
    reset.interrupt = interrupt;
    reset.rank = info.rank;
    reset.size = round.plan.size;
    reset.local_rank = info.local_rank;
    reset.local_size = info.local_size;
    reset.cross_rank = info.cross_rank;
    reset.cross_size = info.cross_size;
    reset.host_index = info.host_index;
    reset.rendezvous = rendezvous_for(round, host);
    return reset;
  }

  // How `host`'s workers reach round `round`'s server: a remote host at the address its SSH
  // connection came from, this machine's at the address the server listens on (loopback when
  // it listens on every address).
  std::string rendezvous_for(const Round& round, const std::string& host) const
      HORA_REQUIRES(io_thread_) {
    return fmt::format("{}:{}", bracketed(round_address_for(round, host)), round.server->port());
  }

  std::string round_address_for(const Round& round, const std::string& host) const
      HORA_REQUIRES(io_thread_) {
    const HostNetwork net = hosts.network(host);
    if (!net.rendezvous_host.empty()) return net.rendezvous_host;
    return !is_wildcard(round.bind_address) ? round.bind_address
           : round.bind_address == "::"     ? "::1"
                                            : "127.0.0.1";
  }

  // What a round's server listens on, as a fixed job's does (cli/launch/job_network.cc): a
  // round of this machine only, the launcher's own address (loopback); with remote hosts, the
  // address they all reach this machine at, or every address when they reach it at different
  // ones.
  std::string round_bind_address(const RoundPlan& plan) const HORA_REQUIRES(io_thread_) {
    std::set<std::string> seen;  // by the remote hosts
    for (const HostSpec& h : plan.hosts) {
      const HostNetwork net = hosts.network(h.name);
      if (!net.rendezvous_host.empty()) seen.insert(net.rendezvous_host);
    }
    if (seen.empty()) return config.base.bind_address;
    if (seen.size() == 1) return *seen.begin();
    return seen.begin()->find(':') != std::string::npos ? "::" : "0.0.0.0";
  }

  // A round's rendezvous server. A fixed-size job's listens where the launch chose, with the
  // job's secret (its ranks know no rounds); an elastic round's where its hosts reach this
  // machine (round_bind_address()), with the round's secret.
  void start_server(Round& round) HORA_REQUIRES(io_thread_) {
    round.bind_address =
        fixed_table != nullptr ? config.base.bind_address : round_bind_address(round.plan);
    rdv::ServerOptions options;
    options.bind_address = round.bind_address;
    options.port = 0;
    options.size = round.plan.size;
    options.secret = fixed_table != nullptr
                         ? secret
                         : rdv::round_secret(secret, static_cast<std::uint32_t>(round.number));
    // A rank that connected answers the server's challenge at once unless the machine is
    // swamped (128 ranks starting on 2 busy cores under a sanitizer took over 10 s): it gets as
    // long as it had to start, --start-timeout. Junk connections stay bounded by
    // max_unauthenticated, not by this wait.
    options.auth_timeout =
        std::max<std::chrono::milliseconds>(rdv::ServerOptions::kDefaultAuthTimeout,
                                            config.base.facts.start_timeout);
    rdv::ServerEvents events;
    const int number = round.number;
    events.on_connected = [this, number](int rank, const std::string& peer) {
      io_thread_.assert_held();
      on_connected(number, rank, peer);
    };
    events.on_disconnected = [this, number](int rank, bool clean, const std::string& why) {
      io_thread_.assert_held();
      on_disconnected(number, rank, clean, why);
    };
    events.on_rejected = [this](const std::string& peer, const std::string& reason) {
      io_thread_.assert_held();
      on_rejected(peer, reason);
    };
    events.on_http_request = [this](const std::string& peer, const std::string& request) {
      io_thread_.assert_held();
      on_http_request(peer, request);
    };
    try {
      round.server = std::make_unique<rdv::Server>(io, options, std::move(events));
    } catch (const rdv::Error& e) {
      throw Error(fixed_table != nullptr
                      ? fmt::format("cannot start the rendezvous server on {}: {}",
                                    round.bind_address, e.what())
                      : fmt::format("cannot start the rendezvous server of round {} on {}: {}",
                                    number, round.bind_address, e.what()));
    }
  }

  // ---- a fixed-size job's round ------------------------------------------------------------

  // The one round of a fixed-size job: its server, Horovod's, and every rank of the table
  // started as a worker whose id is its rank; then the failure policy's timers.
  void begin_fixed_round() HORA_REQUIRES(io_thread_) {
    const RankTable& table = *fixed_table;
    Round& round = rounds[0];
    round.plan = fixed_plan(table);
    round.event = round.began = Clock::now();
    round.reason = "start";
    current = 0;
    next_worker_id = table.size();
    start_server(round);
    JobFacts facts = fixed_facts(round);
    signals.async_wait([this](const boost::system::error_code& ec, int sig) {
      io_thread_.assert_held();
      if (!ec) on_signal(sig);
    });
    for (int r = 0; r < table.size(); ++r) {
      if (ending) break;  // a signal or an earlier spawn failure
      start_fixed_rank(round, r, facts);
    }
    policy->start();
    maybe_finish();
  }

  // What every rank of a fixed-size job is told; each host's network is applied per rank.
  JobFacts fixed_facts(const Round& round) HORA_REQUIRES(io_thread_) {
    JobFacts facts = config.base.facts;
    const std::string& bind = config.base.bind_address;
    if (config.base.horovod_rendezvous) {
      horovod = std::make_unique<HorovodRendezvous>(io, *fixed_table, config.base);
      facts.horovod_addr = bind;
      facts.horovod_port = horovod->port();
    }
    facts.rendezvous = fmt::format("{}:{}", bracketed(bind), round.server->port());
    facts.iface = config.base.iface;
    facts.nccl_ifnames = config.base.nccl_ifnames;
    facts.master_addr = config.base.master_addr;
    facts.master_port = free_port(io, config.base.master_port_probe_address.empty()
                                          ? config.base.master_addr
                                          : config.base.master_port_probe_address);
    facts.secret_hex = rdv::secret_to_hex(secret);
    // The server logs "rendezvous server listening on ADDRESS:PORT" itself (--verbose).
    return facts;
  }

  void start_fixed_rank(const Round& round, int r, JobFacts& facts) HORA_REQUIRES(io_thread_) {
    const RankTable& table = *fixed_table;
    Worker& w = workers[r];
    w.id = r;
    w.host = table.host_of(r);
    w.slot = table.rank(r).local_rank;
    w.rank_in[0] = r;
    if (!config.base.host_network.empty()) {
      const HostNetwork& net =
          config.base.host_network.at(static_cast<std::size_t>(table.rank(r).host_index));
      facts.rendezvous = fmt::format("{}:{}", bracketed(net.rendezvous_host), round.server->port());
      facts.horovod_addr = net.rendezvous_host;
      facts.iface = net.iface;
      facts.nccl_ifnames = net.nccl_ifnames;
    }
    GuardRequest request;
    request.cwd = config.base.cwd;
    request.env = rank_environment(table, r, facts);
    request.argv = config.base.command;
    request.grace = config.base.kill_grace;
    try {
      procs.start(r, hosts.create(r, w.host), request, r);
      log->info("started {}", who(w));
    } catch (const std::exception& e) {
      // A guard that was spawned before the failure is not started: the RankProcess's
      // destructor kills it when the supervisor goes away.
      end_job(fmt::format("could not start {}: {}", who(w), e.what()), 1);
    }
  }

  // The fixed failure policy's view of the job (cli/spawn/fixed_failure_policy.h).
  std::unique_ptr<FixedFailurePolicy> make_policy() {
    FixedFailurePolicy::Settings settings;
    settings.drop_grace = config.base.drop_grace;
    settings.verdict_settle = config.base.verdict_settle;
    settings.start_timeout = config.base.facts.start_timeout;
    settings.stall = config.base.stall;
    FixedFailurePolicy::Job job;
    job.size = fixed_table->size();
    job.who = [this](int r) {
      io_thread_.assert_held();
      return who(workers.at(r));
    };
    job.running = [this](int r) {
      io_thread_.assert_held();
      return procs.running(r);
    };
    job.ending = [this] {
      io_thread_.assert_held();
      return ending;
    };
    job.ranks_seen = [this] {
      io_thread_.assert_held();
      return ranks_seen();
    };
    job.rendezvous_value = [this](const std::string& key) -> std::optional<std::string> {
      io_thread_.assert_held();
      const auto it = rounds.find(0);
      if (it == rounds.end() || !it->second.server) return std::nullopt;
      return it->second.server->value(key);
    };
    job.stuck = [this](const std::vector<int>& ranks) {
      io_thread_.assert_held();
      return procs.stuck(ranks);
    };
    job.end_job = [this](std::string why, int code) {
      io_thread_.assert_held();
      end_job(std::move(why), code);
    };
    return std::make_unique<FixedFailurePolicy>(io, settings, std::move(job));
  }

  // The ranks that reached hora's rendezvous (hora::init()) or Horovod's (hvd.init()).
  std::set<int> ranks_seen() const HORA_REQUIRES(io_thread_) {
    const auto it = rounds.find(current);
    std::set<int> seen =
        it != rounds.end() && it->second.server ? it->second.server->ranks_seen() : std::set<int>{};
    if (horovod) seen.insert(horovod->ranks_seen().begin(), horovod->ranks_seen().end());
    return seen;
  }

  void start_worker(const Round& round, const PlannedRank& p) HORA_REQUIRES(io_thread_) {
    Worker& w = workers[p.worker_id];
    w.id = p.worker_id;
    const HostSpec& planned = round.plan.host_of(p.info.rank);
    w.host = planned;
    for (const HostSpec& h : listed) {
      if (h.name == planned.name) w.host = h;
    }
    w.slot = p.local_slot;
    w.rank_in[round.number] = p.info.rank;

    const RankTable table(round.plan.hosts, round.plan.size);
    JobFacts facts = config.base.facts;
    const HostNetwork net = hosts.network(w.host.name);
    facts.rendezvous = rendezvous_for(round, w.host.name);
    facts.iface = net.iface;
    facts.nccl_ifnames = net.nccl_ifnames;
    facts.master_addr = config.base.master_addr;
    facts.secret_hex = rdv::secret_to_hex(secret);
    if (hvd) {
      facts.horovod_addr =
          net.rendezvous_host.empty() ? horovod_local_address : net.rendezvous_host;
      facts.horovod_port = hvd->port();
      w.horovod_round = round.number;
    } else if (config.base.horovod_rendezvous) {
      // Not served: a program of Horovod's own package would wait for a Gloo store of its own
      // and abort after HOROVOD_GLOO_TIMEOUT_SECONDS. Pointed at this round's server instead,
      // its first HTTP request is recognised there and the job ends at once naming the flag
      // (on_http_request); hora programs never read these variables.
      facts.horovod_addr = round_address_for(round, w.host.name);
      facts.horovod_port = round.server->port();
    }
    // A new worker may wait for the others until their next commit.
    facts.start_timeout = std::max(facts.start_timeout, config.options.elastic_timeout);
    GuardRequest request;
    request.cwd = config.base.cwd;
    request.env = rank_environment(table, p.info.rank, facts);
    request.env.emplace_back(job_env::kElastic, "1");
    request.env.emplace_back(job_env::kRound, std::to_string(round.number));
    request.env.emplace_back(job_env::kWorkerId, std::to_string(w.id));
    if (hvd) request.env.emplace_back(job_env::kHorovodElastic, "1");
    // The launcher decides when the wait for hosts is over: the ranks wait a minute longer.
    request.env.emplace_back(job_env::kElasticTimeout,
                             std::to_string(config.options.elastic_timeout.count() +
                                            kRankWaitMargin.count()));
    request.argv = config.base.command;
    request.grace = config.base.kill_grace;
    try {
      procs.start(w.id, hosts.create(w.id, w.host), request, p.info.rank);
      log->info("started {}", who(w));
    } catch (const std::exception& e) {
      // Never started: not running, and no exit status (not a success at the job's end).
      log->warn("elastic: could not start {}: {}", who(w), e.what());
      blacklist.blacklist(w.host.name, Clock::now());
      arm_cooldown();
      request_reset(fmt::format("{} could not start", who(w)), true);
    }
  }

  // ---- events ----------------------------------------------------------------------------

  void on_connected(int round, int rank, const std::string& peer) HORA_REQUIRES(io_thread_) {
    if (policy) {
      log->info("rank {} reached the rendezvous from {}", rank, peer);
      policy->connected(rank);
    }
    Round& rd = rounds.at(round);
    rd.connected.insert(rank);
    for (auto& [id, w] : workers) {
      const auto it = w.rank_in.find(round);
      if (it != w.rank_in.end() && it->second == rank) {
        w.connected_round = std::max(w.connected_round, round);
        procs.set_output_rank(id, rank);
      }
    }
    if (!rd.formed && static_cast<int>(rd.connected.size()) == rd.plan.size) {
      rd.formed = true;
      if (rd.formation_timer) rd.formation_timer->cancel();
      if (round > 0) {
        log->warn("elastic: round {} formed: {} ranks at the rendezvous {} after {}", round,
                  rd.plan.size, seconds_text(Clock::now() - rd.event), rd.reason);
      }
      stop_servers_before(round);
    }
  }

  // Every worker of round `round` reached its rendezvous: the older rounds' servers have no one
  // left to tell of a newer round (a late AUTH there got its RESET before this round could
  // form), so they stop, and with them their listening sockets and connections.
  void stop_servers_before(int round) HORA_REQUIRES(io_thread_) {
    for (auto& [n, rd] : rounds) {
      if (n >= round) break;
      rd.server.reset();  // on the io thread: the destructor stops it at once, silently
    }
  }

  Worker* worker_of(int round, int rank) HORA_REQUIRES(io_thread_) {
    for (auto& [id, w] : workers) {
      const auto it = w.rank_in.find(round);
      if (it != w.rank_in.end() && it->second == rank) return &w;
    }
    return nullptr;
  }

  void on_disconnected(int round, int rank, bool clean, const std::string& why)
      HORA_REQUIRES(io_thread_) {
    if (policy) {
      policy->disconnected(rank, clean, why);
      return;
    }
    if (clean || ending) return;
    Worker* w = worker_of(round, rank);
    // A worker told of a newer round leaves this one's server: without a goodbye when the reset
    // interrupted it (its connection had failed), which is expected.
    if (w == nullptr || !running(*w) || w->stopping || w->rank_in.rbegin()->first > round) return;
    const int id = w->id;
    log->info("{} lost its rendezvous connection ({}); waiting {} for it to exit", who(*w), why,
              hora::format_duration(config.base.drop_grace));
    w->drop_timer = std::make_unique<asio::steady_timer>(io, config.base.drop_grace);
    w->drop_timer->async_wait([this, id, round, why](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      if (ec || ending) return;
      Worker& lost = workers.at(id);
      if (!running(lost) || lost.stopping || lost.rank_in.rbegin()->first > round) return;
      lost_worker(lost, fmt::format("{} lost its rendezvous connection ({})", who(lost), why));
      procs.kill(id);
    });
  }

  // Asks a worker to end (SIGTERM to its process group through its guard); a worker whose host
  // does not answer (cut off the network) is killed after the grace, which reports it lost
  // once its agent stays silent (AgentRankProcess::kill).
  void stop_worker(Worker& w) HORA_REQUIRES(io_thread_) {
    if (w.stopping || !running(w)) return;
    w.stopping = true;
    if (w.drop_timer) w.drop_timer->cancel();  // its exit is no longer a failure
    procs.stop(w.id);
  }

  // A worker of the job failed: its host leaves the job (blacklisted), with its other workers.
  void lost_worker(Worker& w, const std::string& what) HORA_REQUIRES(io_thread_) {
    if (!first_failure_code) {
      const std::optional<ExitStatus> exit = procs.exit_status(w.id);
      first_failure_code = exit ? exit->exit_code() : 1;
    }
    const auto now = Clock::now();
    const auto until = blacklist.blacklist(w.host.name, now);
    arm_cooldown();
    log->warn("elastic: {}; blacklisting {}{}", what, w.host.address_for_display(),
              until ? fmt::format(" for {}", seconds_text(*until - now)) : "");
    for (auto& [id, other] : workers) {
      if (id != w.id && other.host.name == w.host.name) stop_worker(other);
    }
    request_reset(what, true);
  }

  // Called by procs once the exit is recorded.
  void on_exit(int id, const ExitStatus& status) HORA_REQUIRES(io_thread_) {
    Worker& w = workers.at(id);
    if (w.drop_timer) w.drop_timer->cancel();
    log->info("{} {}", who(w), status.describe());
    if (policy) {
      policy->exited(id, status);
    } else if (!ending && !w.stopping && !status.success()) {
      lost_worker(w, fmt::format("{} {}", who(w), status.describe()));
    } else {
      plan_when_settled();
    }
    maybe_finish();
  }

  void on_signal(int sig) HORA_REQUIRES(io_thread_) {
    const char* abbrev = ::sigabbrev_np(sig);
    const std::string name =
        abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
    const auto now = Clock::now();
    if (!ending) {
      first_signal = now;
      end_job(fmt::format("interrupted by {}; ended the job", name), 128 + sig);
    } else if (first_signal && now - *first_signal < kRepeatedSignal) {
      // The same interrupt delivered twice (e.g. `timeout` signals its child and then its
      // process group); only a deliberate second interrupt skips the grace periods.
    } else {
      // Again, or the first one while the job was already ending (a failure).
      log->warn("{}{}: killing every rank now", name, first_signal ? " again" : "");
      kill_all();
    }
    signals.async_wait([this](const boost::system::error_code& ec, int s) {
      io_thread_.assert_held();
      if (!ec) on_signal(s);
    });
  }

  // A flood of junk connections costs one line per host per second, with a count.
  void on_rejected(const std::string& peer, const std::string& reason) HORA_REQUIRES(io_thread_) {
    if (peer == http_peer) return;
    const std::string host = hora::endpoint_host(peer);
    if (throttle.admit("rejected " + host, Clock::now(), [host](std::uint64_t n) {
          return fmt::format("rejected {} more rendezvous connections from {} in the last 1 s", n,
                             host);
        })) {
      log->warn("rejected a rendezvous connection from {}: {}", peer, reason);
    }
    arm_throttle();
  }

  // An HTTP request at a round's hora rendezvous: in an elastic job without --horovod-elastic
  // that is a worker of Horovod's own package, whose Gloo store start_worker pointed here. It
  // cannot run without Horovod's rendezvous: the job ends now, saying what to change.
  void on_http_request(const std::string& peer, const std::string& request)
      HORA_REQUIRES(io_thread_) {
    if (fixed_table != nullptr || hvd || !config.base.horovod_rendezvous) return;
    http_peer = peer;  // its rejection, which follows, says nothing more
    end_job(fmt::format("elastic: a worker from {} is a program of Horovod's own package: its "
                        "Gloo asked hora's rendezvous for Horovod's HTTP rendezvous (\"{}...\"), "
                        "which an elastic job serves only with --horovod-elastic (it has no "
                        "authentication and, with --host-discovery-script, listens on every "
                        "address, as horovodrun's). Rerun with --horovod-elastic, or import "
                        "hora.torch as hvd in the program",
                        peer, request),
            1);
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

  // ---- discovery -------------------------------------------------------------------------

  void arm_discovery() HORA_REQUIRES(io_thread_) {
    if (config.options.discovery_script.empty() || ending) return;
    discovery_timer.expires_after(config.discovery_interval);
    discovery_timer.async_wait([this](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      if (!ec) run_discovery();
    });
  }

  void run_discovery() HORA_REQUIRES(io_thread_) {
    if (ending || discovery_running) return;
    discovery_running = true;
    if (discovery_thread.joinable()) discovery_thread.join();
    const std::string script = config.options.discovery_script;
    const std::optional<int> slots = config.options.slots_per_host;
    discovery_thread = std::thread([this, script, slots] {
      DiscoveryResult result =
          run_discovery_script(script, slots, Clock::now() + kDiscoveryDeadline);
      asio::post(io, [this, result = std::move(result)] {
        io_thread_.assert_held();
        on_discovery(result);
      });
    });
  }

  void on_discovery(const DiscoveryResult& result) HORA_REQUIRES(io_thread_) {
    discovery_running = false;
    if (ending) return;
    arm_discovery();
    if (!result.warning.empty()) {
      // Once as a warning: a script that does it does it at every run.
      if (!warned_discovery_leftovers) {
        log->warn("elastic: {} (said once; later runs at --log-level info)", result.warning);
      } else {
        log->info("elastic: {}", result.warning);
      }
      warned_discovery_leftovers = true;
    }
    if (!result.ok) {
      if (result.error != last_discovery_error) {
        log->warn(
            "elastic: --host-discovery-script failed (the job goes on with the hosts it "
            "has): {}",
            result.error);
        last_discovery_error = result.error;
      }
      return;
    }
    last_discovery_error.clear();
    const std::vector<HostSpec> found = without_second_names(result.hosts);
    if (found.empty() && !running_ids().empty()) {
      if (!empty_listing_lasted()) return;
    } else if (empty_since) {
      log->warn(
          "elastic: --host-discovery-script lists hosts again after {} without any; the "
          "job goes on",
          seconds_text(Clock::now() - *empty_since));
      empty_since.reset();
    }
    std::set<std::string> now_listed;
    for (const HostSpec& h : found) now_listed.insert(h.name);
    // Hosts that run workers and are no longer listed are lost.
    for (auto& [id, w] : workers) {
      if (running(w) && !w.stopping && now_listed.count(w.host.name) == 0) {
        stop_worker(w);
        request_reset(fmt::format("host {} is no longer listed by the discovery script",
                                  w.host.address_for_display()),
                      true);
      }
    }
    stop_surplus_workers(found);
    const bool back = take_cooled_down();
    const bool changed = found != listed;
    listed = found;
    if (changed || back || waiting_since) {
      hosts_changed(back && !changed ? "a host is back after its cooldown"
                                     : "more slots are available");
    } else {
      prepare_new_hosts();
    }
  }

  // Discovery listed no host while workers run. A script that fails once in a while (a cloud
  // API timing out) must not stop a healthy job, so such a listing counts only once no host has
  // been listed for --elastic-timeout, as long as a job below --min-np waits for hosts. Returns
  // whether it has been that long.
  bool empty_listing_lasted() HORA_REQUIRES(io_thread_) {
    const auto now = Clock::now();
    if (!empty_since) {
      empty_since = now;
      log->warn(
          "elastic: --host-discovery-script listed no host (no line, or only hosts with 0 "
          "slots); the {} running workers go on, and their hosts are dropped only if no host is "
          "listed for {} (--elastic-timeout)",
          running_ids().size(), hora::format_duration(config.options.elastic_timeout));
      return false;
    }
    if (now - *empty_since < config.options.elastic_timeout) return false;
    log->warn("elastic: --host-discovery-script has listed no host for {}; dropping every host",
              seconds_text(now - *empty_since));
    return true;
  }

  // This machine must be one host of the job: under a second name (127.0.0.1 beside localhost)
  // its ranks would be two hosts' ranks, two of them local_rank 0 on one machine. The name the
  // job already knows it by stays (else the first listed); the others are left out, with a
  // warning once per name.
  std::vector<HostSpec> without_second_names(const std::vector<HostSpec>& found)
      HORA_REQUIRES(io_thread_) {
    std::optional<std::string> known;
    for (const HostSpec& h : listed) {
      if (hosts.is_this_machine(h)) known = h.name;
      if (known) break;
    }
    std::optional<std::string> keep;
    for (const HostSpec& h : found) {
      if (h.name == known) keep = h.name;
    }
    std::vector<HostSpec> out;
    for (const HostSpec& h : found) {
      if (!hosts.is_this_machine(h)) {
        out.push_back(h);
        continue;
      }
      if (!keep) keep = h.name;
      if (h.name == *keep) {
        out.push_back(h);
        continue;
      }
      if (second_names.insert(h.name).second) {
        log->warn("{}", second_name_warning(h, *keep));
      }
    }
    return out;
  }

  // Hosts now listed with fewer slots than they run workers: as Horovod, the workers of the
  // highest local ranks (the highest slots) stop, and the next round runs without them.
  void stop_surplus_workers(const std::vector<HostSpec>& found) HORA_REQUIRES(io_thread_) {
    std::map<std::string, int> slots;
    for (const HostSpec& h : found) slots[h.name] = h.slots;
    std::map<std::string, std::vector<Worker*>> surplus;
    for (auto& [id, w] : workers) {
      if (!running(w) || w.stopping) continue;
      const auto it = slots.find(w.host.name);
      if (it != slots.end() && w.slot >= it->second) surplus[w.host.name].push_back(&w);
    }
    for (const auto& [host, ws] : surplus) {
      std::vector<std::string> names;
      int had = 0;
      for (const Worker* w : ws) {
        names.push_back(numbers_text(*w));
        had = std::max(had, w->host.slots);
      }
      for (const HostSpec& h : listed) {
        if (h.name == host) had = h.slots;
      }
      for (Worker* w : ws) stop_worker(*w);
      const int now = slots.at(host);
      request_reset(fmt::format("host {} now has {} slot{}, not {}: stopping the surplus {}",
                                ws.front()->host.address_for_display(), now, now == 1 ? "" : "s",
                                had, fmt::join(names, ", ")),
                    true);
    }
  }

  // "worker W (rank R, local rank L)": its numbers in the current round.
  std::string numbers_text(const Worker& w) const HORA_REQUIRES(io_thread_) {
    const auto r = w.rank_in.find(current);
    if (r == w.rank_in.end() || current < 0) return fmt::format("worker {}", w.id);
    const auto& ranks = rounds.at(current).plan.ranks;
    const auto i = static_cast<std::size_t>(r->second);
    if (i >= ranks.size()) return fmt::format("worker {} (rank {})", w.id, r->second);
    return fmt::format("worker {} (rank {}, local rank {})", w.id, r->second,
                       ranks[i].info.local_rank);
  }

  // The listing or the blacklist changed: new hosts get agents, a wait below --min-np may end,
  // free slots may grow the job.
  void hosts_changed(const std::string& why) HORA_REQUIRES(io_thread_) {
    prepare_new_hosts();
    if (waiting_since) {
      reset_due = true;
      plan_next_round();
    } else {
      maybe_grow(why);
    }
  }

  // Whether prepared, available hosts have room the current round does not use.
  void maybe_grow(const std::string& why) HORA_REQUIRES(io_thread_) {
    if (current < 0 || reset_due) return;
    const Round& rd = rounds.at(current);
    int slots = 0;
    for (const HostSpec& h : available_hosts(Clock::now())) slots += h.slots;
    const int cap = config.options.max_np.value_or(slots);
    if (std::min(slots, cap) > rd.plan.size) request_reset(why, false);
  }

  // ---- blacklist cooldowns ---------------------------------------------------------------

  // A blacklisted host comes back when its cooldown ends: a timer, not the next discovery run
  // (with -H there is none, and a script's unchanged listing would change nothing).
  void arm_cooldown() HORA_REQUIRES(io_thread_) {
    if (ending) return;
    const auto next = blacklist.next_cooldown_end(Clock::now());
    if (!next) return;
    cooldown_timer.expires_at(*next);
    cooldown_timer.async_wait([this](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      if (!ec) on_cooldown();
    });
  }

  void on_cooldown() HORA_REQUIRES(io_thread_) {
    if (ending) return;
    const bool back = take_cooled_down();
    arm_cooldown();
    if (back) hosts_changed("a host is back after its cooldown");
  }

  // Whitelists the hosts whose cooldown ended; whether any did.
  bool take_cooled_down() HORA_REQUIRES(io_thread_) {
    const std::vector<std::string> back = blacklist.take_cooled_down(Clock::now());
    for (const std::string& h : back) {
      log->warn("elastic: host {} is back after its cooldown", h);
      failed_prepare.erase(h);
    }
    return !back.empty();
  }

  // ---- a stopped worker -----------------------------------------------------------------

  // A worker stopped (state T) or held by a debugger (t) makes no progress until resumed, and
  // the others wait in their collectives: it is named within seconds, as in a fixed job, whether
  // or not a round is forming (remote workers through their agents' STATE frames).
  void arm_stopped_look() HORA_REQUIRES(io_thread_) {
    stopped_timer.expires_after(std::chrono::seconds(1));
    stopped_timer.async_wait([this](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      if (ec || ending || finished) return;
      look_for_stopped();
      arm_stopped_look();
    });
  }

  void look_for_stopped() HORA_REQUIRES(io_thread_) {
    std::vector<Worker*> live;
    for (auto& [id, w] : workers) {
      if (running(w) && !w.stopping) live.push_back(&w);
    }
    const std::map<int, StuckProcess> stuck = stuck_workers(live);
    const auto now = Clock::now();
    for (auto it = stopped_since.begin(); it != stopped_since.end();) {
      const auto found = stuck.find(it->first);
      if (found == stuck.end() || found->second.state == 'D') {
        stopped_named.erase(it->first);
        it = stopped_since.erase(it);
      } else {
        ++it;
      }
    }
    for (const auto& [id, p] : stuck) {
      if (p.state != 'T' && p.state != 't') continue;
      const auto since = stopped_since.emplace(id, now).first->second;
      if (now - since < kStoppedNamedAfter || !stopped_named.insert(id).second) continue;
      log->warn(
          "elastic: {} is {} (pid {}); the other workers wait for it: resume it (kill -CONT {}) "
          "or end the job",
          who(workers.at(id)), p.describe(), p.pid, p.pid);
    }
  }

  // ---- a round that does not form --------------------------------------------------------

  // Every worker of a new round must reach its rendezvous: the survivors at their next commit
  // (or at once after an interrupt), the new ones after their start. A worker that never does
  // (stopped by SIGSTOP, held by a debugger, hung) would hold the round, and the job, forever:
  // the round looks at the workers it waits for once a second, names a stopped one at once, and
  // after --elastic-timeout treats every worker still missing as lost.
  void arm_formation_look(Round& round) HORA_REQUIRES(io_thread_) {
    round.formation_timer = std::make_unique<asio::steady_timer>(io, kFormationLook);
    const int number = round.number;
    round.formation_timer->async_wait([this, number](const boost::system::error_code& ec) {
      io_thread_.assert_held();
      if (!ec) look_at_formation(number);
    });
  }

  void look_at_formation(int number) HORA_REQUIRES(io_thread_) {
    if (ending || number != current) return;
    Round& rd = rounds.at(number);
    if (rd.formed) return;
    std::vector<Worker*> missing;
    for (const PlannedRank& p : rd.plan.ranks) {
      Worker& w = workers.at(p.worker_id);
      if (rd.connected.count(p.info.rank) == 0 && running(w) && !w.stopping) {
        missing.push_back(&w);
      }
    }
    const std::map<int, StuckProcess> stuck = stuck_workers(missing);
    const auto waited = Clock::now() - rd.began;
    if (waited >= config.options.elastic_timeout) {
      for (Worker* w : missing) {
        if (w->stopping || !running(*w)) continue;  // stopped with an earlier one's host
        const auto s = stuck.find(w->id);
        lost_worker(*w,
                    fmt::format("{} did not join round {} within {} (--elastic-timeout): {}",
                                who(*w), number,
                                hora::format_duration(config.options.elastic_timeout),
                                s != stuck.end() ? fmt::format("its process {} is in {}",
                                                               s->second.pid, s->second.describe())
                                : procs.local_guard_pid(w->id) > 0
                                    ? "its process runs but did not reach the rendezvous "
                                      "(no commit() since the reset?)"
                                    : "it did not reach the rendezvous (hung, or not "
                                      "committing)"));
        procs.kill(w->id);
      }
      return;
    }
    for (const auto& [id, p] : stuck) {
      if (p.state == 'D' || !rd.named_stuck.insert(id).second) continue;
      log->warn(
          "elastic: round {} waits for {}, whose process {} is in {}; unless it joins, it is "
          "treated as lost {} after the round began (--elastic-timeout)",
          number, who(workers.at(id)), p.pid, p.describe(),
          hora::format_duration(config.options.elastic_timeout));
    }
    arm_formation_look(rd);
  }

  // What the kernel says about the workers' processes (cli/agent/process_state.h), by worker id,
  // for the ones that are stopped, traced or in uninterruptible sleep: this machine's read from
  // /proc here, other hosts' as their agents reported them.
  std::map<int, StuckProcess> stuck_workers(const std::vector<Worker*>& ws) const
      HORA_REQUIRES(io_thread_) {
    std::vector<int> ids;
    for (const Worker* w : ws) ids.push_back(w->id);
    return procs.stuck(ids);
  }

  // ---- ending ----------------------------------------------------------------------------

  void end_job(std::string reason, int code) HORA_REQUIRES(io_thread_) {
    if (ending) return;
    ending = true;
    cause = std::move(reason);
    exit_code = code;
    stop_planning();
    log->info("ending the job: {}", cause);
    for (auto& [n, rd] : rounds) {
      if (rd.server) rd.server->abort_all(cause);
    }
    if (fixed_table != nullptr) {
      // Ranks connected to the rendezvous get the abort notice and abort_grace to exit by
      // themselves (printing why); the others cannot hear it and are terminated now.
      const Round& rd = rounds.at(0);
      procs.end_all(rd.server ? rd.server->ranks_connected() : std::set<int>{},
                    config.base.abort_grace);
    } else {
      // No abort grace: every worker is asked to end now (SIGTERM through its guard).
      procs.end_all({}, std::chrono::milliseconds(0));
    }
    maybe_finish();
  }

  void kill_all() HORA_REQUIRES(io_thread_) { procs.kill_all(); }

  // No next round: the timers that plan one (the reset settle, the wait for hosts, discovery,
  // the cooldowns, a round's formation) are cancelled.
  void stop_planning() HORA_REQUIRES(io_thread_) {
    settle_timer.cancel();
    wait_timer.cancel();
    discovery_timer.cancel();
    cooldown_timer.cancel();
    for (auto& [n, rd] : rounds) {
      if (rd.formation_timer) rd.formation_timer->cancel();
    }
  }

  void maybe_finish() HORA_REQUIRES(io_thread_) {
    if (finished) return;
    // A fixed-size job's ranks not started yet (still spawning in begin_fixed_round()) keep the
    // job alive; once all started, every one that exited by itself exited 0 (a failure ends
    // the job through the policy).
    if (fixed_table != nullptr && !ending) {
      for (int r = 0; r < fixed_table->size(); ++r) {
        if (!procs.started(r)) return;
      }
    }
    if (!procs.all_exited()) return;
    if (!ending && fixed_table == nullptr) {
      // Every worker ended by itself: success when the last round's workers all exited 0.
      if (reset_due || waiting_since || !preparing.empty()) return;
      bool all_ok = current >= 0;
      if (current >= 0) {
        for (const PlannedRank& p : rounds.at(current).plan.ranks) {
          const std::optional<ExitStatus> exit = procs.exit_status(p.worker_id);
          if (!exit || !exit->success()) all_ok = false;
        }
      }
      ending = true;
      exit_code = all_ok ? 0 : first_failure_code.value_or(1);
      if (!all_ok) cause = "elastic: the job ended without a successful last round";
      stop_planning();
    }
    if (!procs.exited_and_drained()) return;
    finished = true;
    procs.cancel_timers();
    stop_planning();
    stopped_timer.cancel();
    throttle_timer.cancel();
    if (policy) policy->cancel();
    boost::system::error_code ignored;
    signals.cancel(ignored);
    for (auto& [n, rd] : rounds) {
      if (rd.server) rd.server->stop();
    }
    if (horovod) horovod->stop();
    if (hvd) hvd->stop();
    io.stop();
  }

  int run() HORA_REQUIRES(io_thread_) {
    if (fixed_table != nullptr) {
      begin_fixed_round();
    } else {
      signals.async_wait([this](const boost::system::error_code& ec, int sig) {
        io_thread_.assert_held();
        if (!ec) on_signal(sig);
      });
      start_horovod();
      reset_due = true;
      reset_events.push_back("start");
      plan_next_round();
      arm_discovery();
      arm_stopped_look();
    }
    if (!finished) io.run();
    if (discovery_thread.joinable()) discovery_thread.join();
    hosts.finish();
    if (!cause.empty()) output.launcher_message(cause);
    return exit_code;
  }
};

Supervisor::Supervisor(boost::asio::io_context& io, ElasticConfig config, ElasticHosts& hosts,
                       Output& output)
    : impl_(std::make_unique<Impl>(io, std::move(config), hosts, output)) {}

Supervisor::Supervisor(boost::asio::io_context& io, const RankTable& table, SupervisorConfig config,
                       RankProcessFactory& factory, Output& output)
    : fixed_hosts_(std::make_unique<FixedHosts>(table, config, factory)) {
  ElasticConfig elastic;
  elastic.np = table.size();
  elastic.options.min_np = table.size();
  elastic.options.max_np = table.size();
  elastic.hosts = table.hosts();
  elastic.base = std::move(config);
  impl_ = std::make_unique<Impl>(io, std::move(elastic), *fixed_hosts_, output, &table);
}

Supervisor::~Supervisor() = default;

int Supervisor::run() {
  impl_->io_thread_.assert_held();  // run()'s caller's thread is the io thread from now on
  return impl_->run();
}

const std::string& Supervisor::cause() const {
  impl_->io_thread_.assert_held();
  return impl_->cause;
}

}  // namespace hora::cli
