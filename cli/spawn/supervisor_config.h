// What a job's supervisor (cli/elastic/supervisor.h) is configured with: the command, the ranks'
// working directory, JobFacts, the network of each host, the stall check, and the graces of the
// failure policy (docs/launcher.md, "Failure policy"). cli/launch/job_config.h fills it for fixed
// and elastic jobs alike.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cli/spawn/rank_environment.h"
#include "cli/spawn/stall_watch.h"

namespace hora::cli {

// How the ranks of one host reach the launcher and each other.
struct HostNetwork {
  std::string rendezvous_host;  // the launcher's address as this host sees it
  std::string iface;            // HORA_IFACE for its ranks; empty: libhora picks by route
  std::string nccl_ifnames;     // NCCL_SOCKET_IFNAME (comma-separated); empty: iface
};

struct SupervisorConfig {
  static constexpr std::chrono::milliseconds kDefaultAbortGrace{2000};
  static constexpr std::chrono::milliseconds kDefaultKillGrace{3000};
  static constexpr std::chrono::milliseconds kDefaultGuardSlack{2000};
  static constexpr std::chrono::milliseconds kDefaultDropGrace{3000};
  static constexpr std::chrono::milliseconds kDefaultDrainTimeout{3000};
  static constexpr std::chrono::milliseconds kDefaultVerdictSettle{300};

  std::vector<std::string> command;
  std::string cwd;                         // the ranks' working directory
  std::string bind_address = "127.0.0.1";  // the rendezvous server's address
  std::string iface = "lo";                // HORA_IFACE etc. for every rank (all-local jobs)
  std::string nccl_ifnames;                // NCCL_SOCKET_IFNAME for them; empty: iface
  std::string master_addr = "127.0.0.1";
  // Per host (index into the rank table's hosts); empty: every rank reaches the rendezvous at
  // bind_address and uses `iface` (all-local jobs). Set when any host is remote: the server then
  // binds bind_address (the launcher host's chosen address, see cli/launch/job_network.h) and each
  // host is told the address it can reach.
  std::vector<HostNetwork> host_network;
  // Every address of the job's remote hosts (their interface reports, and the address SSH
  // reached): Horovod's key-value server answers a peer from another machine only when it comes
  // from one of them. Empty: no such filter (all-local jobs, elastic jobs, or a remote host
  // whose addresses are unknown).
  std::vector<std::string> remote_host_addresses;
  // Where MASTER_PORT is checked for being free: master_addr when empty. When rank 0 is remote
  // the launcher can only check a port on this machine (cli/launch/job_network.cc passes the
  // wildcard address).
  std::string master_port_probe_address;
  JobFacts facts;  // start_timeout, log_level, tcp, forwarded; the rest is
                   // filled in by the supervisor
  bool verbose = false;
  // The launcher's stall check of local ranks (docs/launcher.md, "Failure policy"): the ranks'
  // own HORA_STALL_* settings, as -x, the flags or horarun's environment give them.
  using StallCheck = StallSettings;
  StallCheck stall;
  // Serve Horovod's Gloo HTTP rendezvous (cli/spawn/horovod_rendezvous.h); --no-horovod-rendezvous.
  bool horovod_rendezvous = true;

  // From the abort notice to asking guards to terminate: time for ranks to print the reason
  // and exit by themselves.
  std::chrono::milliseconds abort_grace = kDefaultAbortGrace;
  // The guard's SIGTERM-to-SIGKILL grace.
  std::chrono::milliseconds kill_grace = kDefaultKillGrace;
  // Beyond kill_grace, before the launcher kills a guard that did not finish.
  std::chrono::milliseconds guard_slack = kDefaultGuardSlack;
  // How long a rank may keep running after its rendezvous connection dropped without goodbye.
  std::chrono::milliseconds drop_grace = kDefaultDropGrace;
  // How long output may stay open after the last guard exited.
  std::chrono::milliseconds drain_timeout = kDefaultDrainTimeout;
  // From the first failure heard (while other ranks run) to the verdict naming the cause:
  // time to hear the events that happened before it but were read after it.
  std::chrono::milliseconds verdict_settle = kDefaultVerdictSettle;
};

}  // namespace hora::cli
