#include "cli/launch/elastic_launch.h"

#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "cli/base/errors.h"
#include "cli/elastic/discovery_script.h"
#include "cli/elastic/supervisor.h"
#include "cli/hosts/local_host.h"
#include "cli/hosts/rank_table.h"
#include "cli/launch/job_config.h"
#include "cli/launch/job_hosts.h"
#include "cli/launch/job_network.h"
#include "cli/network/choice.h"
#include "cli/network/spec.h"
#include "cli/output/log.h"
#include "cli/output/log_sink.h"
#include "cli/output/output.h"
#include "cli/remote/remote_hosts.h"
#include "cli/spawn/agent_rank_process.h"
#include "common/write_all.h"

namespace hora::cli {
namespace {

namespace asio = boost::asio;

// The first look at the hosts may take this long.
constexpr std::chrono::seconds kFirstDiscovery{30};

// How many names of the first listing are looked up at once.
constexpr std::size_t kLookupThreads = 64;

// Hosts through the agents: the ones prepared at the start, and the ones the supervisor finds.
class AgentElasticHosts : public ElasticHosts {
 public:
  // `networks`: the first hosts' network as the launch chose it (this machine's with an empty
  // rendezvous_host: each round's server decides).
  AgentElasticHosts(asio::io_context& io, const LocalHost& local, RemoteOptions ro,
                    std::vector<HostSpec> hosts, RemotePlan plan, std::string local_guard,
                    std::map<std::string, HostNetwork> networks)
      : io_(io), local_(local), ro_(std::move(ro)), networks_(std::move(networks)) {
    for (const auto& [index, host] : plan.hosts) {
      address_[hosts[static_cast<std::size_t>(index)].name] = host.launcher_address;
    }
    for (const HostSpec& h : hosts) prepared_.insert(h.name);
    factory_ = std::make_unique<AgentRankProcessFactory>(io, hosts, std::move(plan.hosts),
                                                         std::move(local_guard));
  }

  bool prepared(const std::string& host) const override { return prepared_.count(host) != 0; }

  void prepare(const std::vector<HostSpec>& hosts,
               std::function<void(const std::string&, const std::string&)> done) override {
    if (worker_.joinable()) worker_.join();
    worker_ = std::thread([this, hosts, done] {
      // Off the io thread: resolution and the preflight block (one deadline,
      // ro_.preflight_timeout).
      std::string error;
      std::map<int, ssh::Target> targets;
      RemotePlan plan;
      try {
        targets = resolve_remote_hosts(hosts, local_, ro_);
        plan = prepare_remote_hosts(targets, ro_);
      } catch (const std::exception& e) {
        error = e.what();
      }
      auto shared = std::make_shared<RemotePlan>(std::move(plan));
      asio::post(io_, [this, hosts, done, error, shared] {
        for (std::size_t i = 0; i < hosts.size(); ++i) {
          const HostSpec& h = hosts[i];
          std::string why = error;
          try {
            if (why.empty()) {
              auto it = shared->hosts.find(static_cast<int>(i));
              if (it != shared->hosts.end()) {
                address_[h.name] = it->second.launcher_address;
                factory_->add_remote(h, std::move(it->second));
              } else {
                factory_->add_local(h);
              }
              prepared_.insert(h.name);
            }
          } catch (const std::exception& e) {
            why = e.what();
          }
          done(h.name, why);
        }
      });
    });
  }

  std::unique_ptr<RankProcess> create(int worker, const HostSpec& host) override {
    return factory_->create(worker, host);
  }

  HostNetwork network(const std::string& host) const override {
    const auto chosen = networks_.find(host);
    if (chosen != networks_.end()) return chosen->second;
    // A host found later: its ranks reach the launcher where its SSH connection came from and
    // take the interface their route to it goes through. This machine's workers: rendezvous_host
    // stays empty, the round's server decides.
    HostNetwork net;
    const auto it = address_.find(host);
    if (it != address_.end()) net.rendezvous_host = it->second;
    return net;
  }

  bool is_this_machine(const HostSpec& host) override {
    const auto it = this_machine_.find(host.name);
    if (it != this_machine_.end()) return it->second;
    bool local = false;
    try {
      local = resolve_remote_hosts({host}, local_, ro_).empty();
    } catch (const UsageError&) {
      // An ssh_config error names the host when it is prepared; here it is simply not local.
    }
    this_machine_.emplace(host.name, local);
    return local;
  }

  void finish() override {
    if (worker_.joinable()) worker_.join();
  }

  ~AgentElasticHosts() override { finish(); }

 private:
  asio::io_context& io_;
  const LocalHost& local_;
  RemoteOptions ro_;
  std::map<std::string, HostNetwork> networks_;  // the first hosts', by name
  std::unique_ptr<AgentRankProcessFactory> factory_;
  std::set<std::string> prepared_;
  std::map<std::string, std::string> address_;  // remote host -> launcher address it sees
  std::map<std::string, bool> this_machine_;    // host name -> is_this_machine()
  std::thread worker_;
};

std::vector<HostSpec> first_hosts(const Options& options, const LaunchContext& ctx) {
  const ElasticOptions& e = options.elastic;
  if (e.discovery_script.empty()) return listed_hosts(options, ctx.env);
  const DiscoveryResult r =
      run_discovery_script(e.discovery_script, e.slots_per_host,
                           std::chrono::steady_clock::now() + kFirstDiscovery);
  if (!r.warning.empty()) launcher_log()->warn("elastic: {}", r.warning);
  if (!r.ok) {
    // r.error names the script and what went wrong ("... exited with code 127; its stderr ...").
    throw UsageError(fmt::format("{}; the job cannot start without its hosts", r.error));
  }
  return r.hosts;
}

// The discovery script's first listing, as the supervisor treats every later one: this machine
// under a second name is ignored (the first name stays), with a warning. -H and --hostfile are
// the user's own words: there a second name is refused (check_local_host_once).
std::vector<HostSpec> without_second_names(const std::vector<HostSpec>& hosts,
                                           const LocalHost& local, const RemoteOptions& ro) {
  const std::map<int, ssh::Target> remote = resolve_remote_hosts(hosts, local, ro);
  std::vector<HostSpec> out;
  const HostSpec* first = nullptr;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const HostSpec& h = hosts[i];
    if (remote.count(static_cast<int>(i)) != 0 || first == nullptr) {
      if (remote.count(static_cast<int>(i)) == 0) first = &h;
      out.push_back(h);
      continue;
    }
    launcher_log()->warn("{}", second_name_warning(h, first->address_for_display()));
  }
  return out;
}

// The remote hosts of the first listing whose address cannot be resolved (a name the script got
// from a cloud API before its DNS record exists, a typo): host index -> why. Looked up on
// threads of their own before the preflight, which would refuse the whole job for one of them.
std::map<int, std::string> unresolvable(const std::vector<HostSpec>& hosts,
                                        const std::map<int, ssh::Target>& remote,
                                        const RemoteOptions& ro) {
  std::map<int, std::string> out;
  auto it = remote.begin();
  while (it != remote.end()) {
    // At most kLookupThreads lookups at a time.
    std::map<int, std::future<std::string>> lookups;
    for (; it != remote.end() && lookups.size() < kLookupThreads; ++it) {
      lookups.emplace(it->first, std::async(std::launch::async, [&ro, t = it->second] {
                        try {
                          ro.connect.resolver(t.hostname, t.port);
                          return std::string();
                        } catch (const std::exception& e) {
                          return std::string(e.what());
                        }
                      }));
    }
    for (auto& [index, lookup] : lookups) {
      std::string why = lookup.get();
      if (why.empty()) continue;
      // The resolver's message starts with the name it looked up (ssh_config's HostName).
      const std::string& name = hosts[static_cast<std::size_t>(index)].name;
      out.emplace(index, why.rfind(name + ":", 0) == 0 ? why : fmt::format("{}: {}", name, why));
    }
  }
  return out;
}

// Leaves out the first listing's hosts whose address cannot be resolved, with a warning, when
// the others have --min-np slots (later listings are treated so by the supervisor: a host that
// cannot be prepared takes no workers). Below --min-np the job cannot start: UsageError naming
// them.
std::vector<HostSpec> without_unresolvable(const std::vector<HostSpec>& hosts,
                                           const LocalHost& local, const RemoteOptions& ro,
                                           int min_np) {
  const std::map<int, std::string> bad =
      unresolvable(hosts, resolve_remote_hosts(hosts, local, ro), ro);
  if (bad.empty()) return hosts;
  std::vector<HostSpec> out;
  std::vector<std::string> why;
  long long slots = 0;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const auto it = bad.find(static_cast<int>(i));
    if (it != bad.end()) {
      why.push_back(it->second);
      continue;
    }
    slots += hosts[i].slots;
    out.push_back(hosts[i]);
  }
  if (slots < min_np) {
    throw UsageError(fmt::format(
        "the discovery script's hosts cannot all be resolved ({}); the others have {} slot{}, "
        "below --min-np {}: the job cannot start",
        fmt::join(why, "; "), slots, slots == 1 ? "" : "s", min_np));
  }
  launcher_log()->warn(
      "elastic: leaving out the discovery script's host{} that cannot be resolved: {}; the job "
      "starts on the other {} slot{}",
      why.size() == 1 ? "" : "s", fmt::join(why, "; "), slots, slots == 1 ? "" : "s");
  return out;
}

// The job's configuration and network as a fixed job's (cli/launch/job_config.h): the interface
// choice over the hosts known at the start that have slots (probes, --network-interfaces), the
// launcher's address, MASTER_ADDR, and JobFacts for the first round's layout. `networks` gets
// each of those hosts' network by name. Two differences, both because hosts may join later:
// this machine's ranks follow each round's server address (an empty rendezvous_host), and a job
// with a discovery script that starts on this machine alone does not pin loopback (its ranks
// take the interface their route goes through, as the ranks of hosts found later do).
SupervisorConfig first_network(const Options& options, const LaunchContext& ctx,
                               const std::vector<HostSpec>& hosts, RemotePlan& plan,
                               std::map<std::string, HostNetwork>& networks) {
  const bool discovery = !options.elastic.discovery_script.empty();
  const NetworkSpec spec = parse_network_spec(options.network_interfaces);
  // The hosts with slots, and the plan's remote hosts renumbered to them for the choice.
  std::vector<HostSpec> with_slots;
  std::vector<int> index_of;  // position in with_slots -> index in hosts
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].slots <= 0) continue;
    with_slots.push_back(hosts[i]);
    index_of.push_back(static_cast<int>(i));
  }
  const int np = std::max(1, *options.num_proc);
  if (with_slots.empty()) {
    // A listing with no slot yet (`localhost:0`) is a wait for hosts like any other below
    // --min-np (the supervisor says so); its hosts get the network of hosts found later.
    SupervisorConfig config =
        job_config(options, ctx, RankTable({HostSpec{{}, "localhost", 1}}, 1));
    config.bind_address = "127.0.0.1";
    config.iface.clear();
    config.master_addr = "127.0.0.1";
    return config;
  }
  if (!discovery) {
    std::vector<std::string> names;
    for (const HostSpec& h : with_slots) names.push_back(h.name);
    check_spec_hosts(spec, names);
  }
  const int slots =
      static_cast<int>(std::min<long long>(total_slots(with_slots), RankTable::kMaxRanks));
  const RankTable all(with_slots, slots);
  // JobFacts for the first round's layout (OMP_NUM_THREADS' default).
  SupervisorConfig config = job_config(options, ctx, RankTable(with_slots, std::min(slots, np)));
  // (Past RankTable::kMaxRanks slots the table leaves the last hosts out: they are treated as
  // hosts found later.)
  const std::size_t n = all.hosts().size();
  RemotePlan chosen;
  for (std::size_t j = 0; j < n; ++j) {
    auto it = plan.hosts.find(index_of[j]);
    if (it == plan.hosts.end()) continue;
    it->second.index = static_cast<int>(j);
    chosen.hosts.emplace(static_cast<int>(j), std::move(it->second));
    plan.hosts.erase(it);
  }
  const JobNetwork network = choose_job_network(all, chosen, spec, options.start_timeout);
  if ((options.dry_run || options.verbose) && network.reach) {
    hora::write_all(ctx.stdout_fd, "network: reachability measured by the probes:\n" +
                                       format_reachability_table(network.probed, *network.reach));
  }
  if (options.dry_run || options.verbose) {
    hora::write_all(ctx.stdout_fd, describe_choice(network.choice));
  }
  apply_job_network(network, all, chosen, config);
  bool this_machine = false;
  for (std::size_t j = 0; j < n; ++j) {
    const auto remote = chosen.hosts.find(static_cast<int>(j));
    HostNetwork net = config.host_network.empty()
                          ? HostNetwork{"", config.iface, config.nccl_ifnames}
                          : config.host_network.at(j);
    if (remote == chosen.hosts.end()) {
      this_machine = true;
      net.rendezvous_host.clear();
      if (discovery && !chosen.any() && spec.empty()) {
        net.iface.clear();
        net.nccl_ifnames.clear();
        if (options.dry_run || options.verbose) {
          hora::write_all(ctx.stdout_fd,
                          "network: hosts may join (--host-discovery-script): this machine's "
                          "ranks take the interface their route goes through, not loopback\n");
        }
      }
    } else {
      launcher_log()->info("{}: reaches the launcher at {}", remote->second.describe(),
                           net.rendezvous_host);
    }
    networks[with_slots[j].name] = std::move(net);
  }
  // The remote hosts go back to the plan under their own index.
  for (auto& [j, host] : chosen.hosts) {
    host.index = index_of[static_cast<std::size_t>(j)];
    plan.hosts.emplace(host.index, std::move(host));
  }
  // A round of this machine alone listens where the choice put this machine's ranks: loopback
  // when every host is this machine; when none is, loopback too.
  if (!this_machine) config.bind_address = "127.0.0.1";
  return config;
}

}  // namespace

int launch_elastic(const Options& options, const LaunchContext& ctx) {
  std::vector<HostSpec> hosts = first_hosts(options, ctx);
  const LocalHost local = LocalHost::discover();
  const RemoteOptions ro = remote_options(options, ctx);
  const bool discovery = !options.elastic.discovery_script.empty();
  if (discovery) {
    hosts = without_second_names(hosts, local, ro);
    hosts = without_unresolvable(hosts, local, ro, std::max(1, options.elastic.min_np));
  }
  const std::map<int, ssh::Target> remote = resolve_remote_hosts(hosts, local, ro);
  check_local_host_once(hosts, remote);
  if (options.dry_run || options.verbose) {
    std::string text =
        fmt::format("elastic job: -np {}, --min-np {}{}\n", *options.num_proc,
                    options.elastic.min_np,
                    options.elastic.max_np ? fmt::format(", --max-np {}", *options.elastic.max_np)
                                           : "");
    for (const HostSpec& h : hosts) {
      text += fmt::format("host {}: {} slot{}\n", h.address_for_display(), h.slots,
                          h.slots == 1 ? "" : "s");
    }
    hora::write_all(ctx.stdout_fd, text);
  }
  // Steps 3 and 4 as in a fixed job: the preflight, then the interface choice.
  RemotePlan plan = prepare_remote_hosts(remote, ro);
  std::map<std::string, HostNetwork> networks;
  SupervisorConfig base = first_network(options, ctx, hosts, plan, networks);
  if (options.dry_run) return 0;

  ElasticConfig config;
  config.options = options.elastic;
  config.np = *options.num_proc;
  config.hosts = hosts;
  config.base = std::move(base);
  const int slots = static_cast<int>(std::min<long long>(total_slots(hosts), RankTable::kMaxRanks));

  asio::io_context io;
  AgentElasticHosts agents(io, local, ro, hosts, std::move(plan), ctx.local_guard,
                           std::move(networks));
  // --output-filename keeps a folder per rank: as many as the job may have.
  const int most = options.elastic.max_np.value_or(std::max(config.np, slots));
  Output output(OutputOptions{options.prefix_timestamp, options.output_filename, options.tag_output,
                              options.merge_stderr},
                most, ctx.stdout_fd, ctx.stderr_fd, &io);
  const LogSinkAttachment log_to_output(output);
  Supervisor supervisor(io, std::move(config), agents, output);
  const int rc = supervisor.run();
  output.flush(rc == 130 || rc == 143 ? std::chrono::milliseconds(2000) : Output::kStalledReader);
  return rc;
}

}  // namespace hora::cli
