// Runs one job, fixed-size or elastic, as rounds of ranks (docs/launcher.md, "Failure policy";
// docs/elastic.md): a fixed-size job is one round that is never re-planned, the way torchrun's
// agent runs a fixed job as an elastic one with min = max.
//
// What both share: each round's rendezvous server, the ranks' processes (RankProcesses,
// cli/spawn/rank_processes.h: started with their events, their output relayed line by line,
// asked to end and killed after the graces, "all exited and drained"), the end of the job
// (ABORT(reason) from the rendezvous to every rank, SIGTERM through each guard, SIGKILL after
// kill_grace, guards still running after kill_grace + guard_slack killed), SIGINT/SIGTERM
// (130/143; a second one a second or more later kills every rank at once), and the throttled
// warnings about rejected rendezvous connections. run() returns once every guard has exited and
// every output stream is drained (or drain_timeout passed after the last exit), then prints the
// cause.
//
// A fixed-size job (the RankTable constructor): one round of the table's ranks, each a worker
// whose id is its rank, with the job's secret, Horovod's Gloo HTTP rendezvous and MASTER_PORT;
// what their events mean is the fixed failure policy's (cli/spawn/fixed_failure_policy.h): the
// first failing rank is the cause and its code the exit code, ranks missing at --start-timeout,
// a rank that lost its rendezvous connection and keeps running, or the stall check end the job
// (exit 1), a lost host agent ends it with 255. Ranks connected to the rendezvous get
// abort_grace to exit by themselves before SIGTERM.
//
// An elastic job (the ElasticHosts constructor): rounds of workers, each round with its own
// rendezvous server and secret; a lost worker blacklists its host and starts the next round on
// the hosts left (RESET with interrupt to the survivors); a host found by discovery gets workers
// in the next round (RESET without interrupt: the survivors join at their next commit). A worker
// that has not reached its round's rendezvous --elastic-timeout after the round began is lost (a
// stopped or traced one on this machine is named with its state at once). A blacklisted host
// comes back when its cooldown ends (a timer). A round's server stops once a newer round formed.
// What the script lists is judged here (docs/elastic.md, "What horarun does with a listing"): a
// second name for this machine is ignored, fewer slots stop a host's highest local ranks, and an
// empty listing counts only once it lasted --elastic-timeout. Ending: every worker exited 0 ->
// 0; below --min-np for --elastic-timeout, more resets than --reset-limit, no worker left to hand
// on the state -> the first failed worker's code (1 when none failed).
//
// Horovod's elastic rendezvous (cli/elastic/horovod_elastic.h; docs/elastic.md, "Horovod elastic
// programs"): an elastic job with --horovod-elastic serves it for its life on one port;
// begin_round swaps its plan, notifies rank 0 of added hosts and releases the survivors' held
// rank_and_size requests once all asked; a rank that reaches hvd.init() joins the round
// (on_connected). Without the flag, workers' HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT name their round's
// hora server, so a Horovod worker's first HTTP request ends the job naming the flag
// (on_http_request). A fixed job's `horovod` is HorovodRendezvous (cli/spawn/horovod_rendezvous.h).
//
// Threading: everything runs on the io_context of the thread that calls run(): workers' pipes
// and exits, the rounds' servers, timers, signals. The state is that thread's role
// (hora::ThreadRole, common/thread_annotations.h), which every handler asserts and every method
// requires; clang's -Wthread-safety checks it in every clang build. Two kinds of work leave that
// thread and post their answers back: the discovery script (one run at a time) and preparing
// new hosts (ElasticHosts::prepare).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "cli/hosts/host_list.h"
#include "cli/hosts/rank_table.h"
#include "cli/options/options.h"
#include "cli/output/output.h"
#include "cli/spawn/rank_process.h"
#include "cli/spawn/supervisor_config.h"

namespace hora::cli {

// The hosts' side of an elastic job: the launch pipeline implements it with the agents
// (cli/launch/elastic_launch.cc); tests may use local processes.
class ElasticHosts {
 public:
  virtual ~ElasticHosts() = default;
  // Whether `host` can start workers now (its agent runs).
  virtual bool prepared(const std::string& host) const = 0;
  // Prepares `hosts` (preflight and agent) away from the io thread; calls done(host, error) for
  // each on the io thread (error empty: prepared).
  virtual void prepare(
      const std::vector<HostSpec>& hosts,
      std::function<void(const std::string& host, const std::string& error)> done) = 0;
  // A worker's process on a prepared host (cli/spawn/rank_process.h); `worker` names it.
  virtual std::unique_ptr<RankProcess> create(int worker, const HostSpec& host) = 0;
  // How `host`'s ranks reach the launcher, and their interface (may be empty: by route).
  // rendezvous_host is empty for this machine: the round's server decides (loopback, or the
  // address the remote hosts of the round reach this machine at).
  virtual HostNetwork network(const std::string& host) const = 0;
  // Whether `host` is this machine (its workers run without SSH). A job has this machine as
  // one host: a second name for it in discovery's listing is ignored.
  virtual bool is_this_machine(const HostSpec& host) = 0;
  // Called once when the job is over (joins what prepare() started).
  virtual void finish() {}
};

struct ElasticConfig {
  // command, cwd, facts, graces, as a fixed job's (cli/launch/job_config.h); bind_address: where
  // a round of this machine's workers alone listens. Each host's network: ElasticHosts::network.
  SupervisorConfig base;
  ElasticOptions options;
  int np = 1;                                          // round 0's ranks
  std::vector<HostSpec> hosts;                         // the hosts known at the start, in order
  std::chrono::milliseconds discovery_interval{1000};  // Horovod's: about once a second
  // A lost worker's events (its host's other workers exit too) are gathered until every worker
  // being stopped has exited, and at most this long, before the next round is planned.
  std::chrono::milliseconds reset_settle{300};
};

class Supervisor {
 public:
  // An elastic job: rounds on the hosts that `hosts` prepares.
  Supervisor(boost::asio::io_context& io, ElasticConfig config, ElasticHosts& hosts,
             Output& output);
  // A fixed-size job: one round of `table`'s ranks (min = max = -np), never re-planned, no
  // discovery; its ranks come from `factory` (`table` and `factory` outlive the supervisor).
  // What its users see is the fixed job's: the rank table's numbers, the job's secret and no
  // HORA_ELASTIC* variables, Horovod's Gloo HTTP rendezvous (config.horovod_rendezvous),
  // MASTER_PORT, and the fixed failure policy (cli/spawn/fixed_failure_policy.h): the first
  // failing rank is the cause and its code the exit code, 130/143 after SIGINT/SIGTERM, 1 for a
  // start timeout, a lost rank or a launch failure, 255 for a lost agent.
  Supervisor(boost::asio::io_context& io, const RankTable& table, SupervisorConfig config,
             RankProcessFactory& factory, Output& output);
  ~Supervisor();

  // Runs the job to its end; returns horarun's exit code. Throws Error if a rendezvous server
  // cannot start before anything was launched.
  int run();

  // Why the job ended (what run() printed last); empty when it succeeded.
  const std::string& cause() const;

 private:
  std::unique_ptr<ElasticHosts> fixed_hosts_;  // a fixed job's hosts: its factory and network
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hora::cli
