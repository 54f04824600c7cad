#include "cli/spawn/rank_environment.h"

#include <algorithm>
#include <string_view>

namespace hora::cli {
namespace {

constexpr std::string_view kContract[] = {
    "HORA_RANK",
    "HORA_SIZE",
    "HORA_LOCAL_RANK",
    "HORA_LOCAL_SIZE",
    "HORA_CROSS_RANK",
    "HORA_CROSS_SIZE",
    "HORA_HOSTNAME",
    "HORA_HOST_INDEX",
    "HORA_RENDEZVOUS",
    "HORA_IFACE",
    "HORA_SECRET",
    "HORA_START_TIMEOUT",
    "HORA_LOG_LEVEL",
    "HOROVOD_RANK",
    "HOROVOD_SIZE",
    "HOROVOD_LOCAL_RANK",
    "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK",
    "HOROVOD_CROSS_SIZE",
    "HOROVOD_HOSTNAME",
    "HOROVOD_CONTROLLER",
    "HOROVOD_CPU_OPERATIONS",
    "HOROVOD_GLOO_IFACE",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR",
    "HOROVOD_GLOO_RENDEZVOUS_PORT",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "ROLE_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "GLOO_SOCKET_IFNAME",
    "NCCL_SOCKET_IFNAME",
    "PYTHONUNBUFFERED",
    "NCCL_IB_DISABLE",
    "GROUP_WORLD_SIZE",
    "ROLE_NAME",
    "ROLE_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "OMP_NUM_THREADS",
};

void put(EnvBlock& env, std::string name, std::string value) {
  auto it = std::find_if(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
  if (it != env.end()) {
    it->second = std::move(value);
  } else {
    env.emplace_back(std::move(name), std::move(value));
  }
}

}  // namespace

bool is_contract_variable(const std::string& name) {
  return std::find(std::begin(kContract), std::end(kContract), name) != std::end(kContract);
}

EnvBlock rank_environment(const RankTable& table, int rank, const JobFacts& facts) {
  const RankInfo& r = table.rank(rank);
  const HostSpec& host = table.host_of(rank);
  const std::string s_rank = std::to_string(r.rank);
  const std::string s_size = std::to_string(table.size());
  const std::string s_local_rank = std::to_string(r.local_rank);
  const std::string s_local_size = std::to_string(r.local_size);
  const std::string s_cross_rank = std::to_string(r.cross_rank);
  const std::string s_cross_size = std::to_string(r.cross_size);
  const std::string s_host_index = std::to_string(r.host_index);

  EnvBlock env;
  env.reserve(48);
  env.emplace_back("HORA_RANK", s_rank);
  env.emplace_back("HORA_SIZE", s_size);
  env.emplace_back("HORA_LOCAL_RANK", s_local_rank);
  env.emplace_back("HORA_LOCAL_SIZE", s_local_size);
  env.emplace_back("HORA_CROSS_RANK", s_cross_rank);
  env.emplace_back("HORA_CROSS_SIZE", s_cross_size);
  env.emplace_back("HORA_HOSTNAME", host.name);
  env.emplace_back("HORA_HOST_INDEX", s_host_index);
  env.emplace_back("HORA_RENDEZVOUS", facts.rendezvous);
  // An empty iface (remote hosts without --network-interfaces) leaves the interface variables
  // unset: libhora then binds on the source address of its route to HORA_RENDEZVOUS, and
  // NCCL/Gloo programs use their own defaults rather than an empty name.
  const bool iface = !facts.iface.empty();
  if (iface) env.emplace_back("HORA_IFACE", facts.iface);
  env.emplace_back("HORA_SECRET", facts.secret_hex);
  env.emplace_back("HORA_START_TIMEOUT", std::to_string(facts.start_timeout.count()));
  if (!facts.log_level.empty()) env.emplace_back("HORA_LOG_LEVEL", facts.log_level);

  env.emplace_back("HOROVOD_RANK", s_rank);
  env.emplace_back("HOROVOD_SIZE", s_size);
  env.emplace_back("HOROVOD_LOCAL_RANK", s_local_rank);
  env.emplace_back("HOROVOD_LOCAL_SIZE", s_local_size);
  env.emplace_back("HOROVOD_CROSS_RANK", s_cross_rank);
  env.emplace_back("HOROVOD_CROSS_SIZE", s_cross_size);
  env.emplace_back("HOROVOD_HOSTNAME", host.name);
  env.emplace_back("HOROVOD_CONTROLLER", "gloo");
  env.emplace_back("HOROVOD_CPU_OPERATIONS", "gloo");
  if (iface) env.emplace_back("HOROVOD_GLOO_IFACE", facts.iface);
  if (facts.horovod_port != 0) {
    env.emplace_back("HOROVOD_GLOO_RENDEZVOUS_ADDR", facts.horovod_addr);
    env.emplace_back("HOROVOD_GLOO_RENDEZVOUS_PORT", std::to_string(facts.horovod_port));
  }

  env.emplace_back("RANK", s_rank);
  env.emplace_back("WORLD_SIZE", s_size);
  env.emplace_back("LOCAL_RANK", s_local_rank);
  env.emplace_back("LOCAL_WORLD_SIZE", s_local_size);
  env.emplace_back("GROUP_RANK", s_host_index);
  env.emplace_back("ROLE_RANK", s_rank);
  env.emplace_back("GROUP_WORLD_SIZE", std::to_string(table.hosts().size()));
  env.emplace_back("ROLE_NAME", "default");
  env.emplace_back("ROLE_WORLD_SIZE", s_size);
  env.emplace_back("TORCHELASTIC_RUN_ID", facts.run_id.empty() ? "none" : facts.run_id);
  env.emplace_back("TORCHELASTIC_RESTART_COUNT", "0");
  env.emplace_back("TORCHELASTIC_MAX_RESTARTS", "0");
  env.emplace_back("MASTER_ADDR", facts.master_addr);
  env.emplace_back("MASTER_PORT", std::to_string(facts.master_port));

  if (iface) {
    env.emplace_back("GLOO_SOCKET_IFNAME", facts.iface);
    env.emplace_back("NCCL_SOCKET_IFNAME",
                     facts.nccl_ifnames.empty() ? facts.iface : facts.nccl_ifnames);
  }
  env.emplace_back("PYTHONUNBUFFERED", "1");
  if (facts.tcp) env.emplace_back("NCCL_IB_DISABLE", "1");

  if (facts.omp_threads_default && r.local_size > 1) env.emplace_back("OMP_NUM_THREADS", "1");

  for (const auto& [name, value] : facts.tuning) put(env, name, value);
  for (const auto& [name, value] : facts.forwarded) put(env, name, value);
  // The launcher's own variables last, for names nothing above set (a std::set would reorder).
  const std::size_t own = env.size();
  for (const auto& var : facts.inherited) {
    const auto end = env.begin() + static_cast<std::ptrdiff_t>(own);
    // (No structured binding here: clang 14 cannot capture one in a lambda.)
    if (std::none_of(env.begin(), end, [&](const auto& kv) { return kv.first == var.first; })) {
      env.emplace_back(var.first, var.second);
    }
  }
  return env;
}

}  // namespace hora::cli
