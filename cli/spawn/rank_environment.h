// The environment block of one rank: the contract of docs/environment.md (HORA_*, Horovod's and
// torchrun's names), plus variables from -x and --tcp, then the launcher's own forwarded
// environment (cli/spawn/env_forwarding.h) for names still unset. The guard sets these on top of
// the environment it was started with (docs/launcher.md); test/cli/spawn/rank_environment_test.cc
// holds this file to docs/environment.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cli/base/environment.h"
#include "cli/hosts/rank_table.h"

namespace hora::cli {

// Facts about the job that are the same for every rank, or chosen per host by the caller.
struct JobFacts {
  std::string rendezvous;          // host:port this rank's host reaches the rendezvous server at
  std::string iface;               // the interface this rank's host uses (HORA_IFACE); empty:
                                   // HORA_IFACE and the *_IFNAME variables are not set
  std::string nccl_ifnames;        // NCCL_SOCKET_IFNAME (comma-separated names); empty: iface
  std::string master_addr;         // an address of rank 0's host every rank can reach
  std::uint16_t master_port = 0;   // a port free on rank 0's host
  std::string secret_hex;          // 64 hex digits
  std::string horovod_addr;        // Horovod's HTTP rendezvous as this rank's host reaches it;
  std::uint16_t horovod_port = 0;  // 0: not served (HOROVOD_GLOO_RENDEZVOUS_* not set)
  std::chrono::seconds start_timeout{30};
  std::string log_level;  // empty: HORA_LOG_LEVEL not set
  bool tcp = false;       // --tcp: NCCL_IB_DISABLE=1
  EnvBlock tuning;        // runtime tuning from horovodrun's engine flags
  EnvBlock forwarded;     // -x NAME=VALUE, applied last (the user's word wins)
  // The launcher's environment minus the denylist (cli/spawn/env_forwarding.h); set only for names
  // the contract, the tuning and -x leave unset.
  EnvBlock inherited;
  std::string run_id;                // TORCHELASTIC_RUN_ID
  int restart_count = 0;             // TORCHELASTIC_RESTART_COUNT: this attempt (--max-restarts)
  int max_restarts = 0;              // TORCHELASTIC_MAX_RESTARTS: --max-restarts
  bool omp_threads_default = false;  // OMP_NUM_THREADS=1 for ranks of hosts with > 1 rank
};

// Variables for rank `rank` of `table`, in a stable order. A name appears once; when -x
// names a contract variable, -x wins (and the launcher warns, see supervisor).
EnvBlock rank_environment(const RankTable& table, int rank, const JobFacts& facts);

// The contract variable names (everything rank_environment() sets before -x), for warnings.
bool is_contract_variable(const std::string& name);

}  // namespace hora::cli
