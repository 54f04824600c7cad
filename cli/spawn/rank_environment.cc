#include "cli/spawn/rank_environment.h"

#include <algorithm>
#include <iterator>

#include "common/job_environment.h"

namespace hora::cli {
namespace {

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
  return std::find(std::begin(job_env::kContract), std::end(job_env::kContract), name) !=
         std::end(job_env::kContract);
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
  env.emplace_back(job_env::kRank, s_rank);
  env.emplace_back(job_env::kSize, s_size);
  env.emplace_back(job_env::kLocalRank, s_local_rank);
  env.emplace_back(job_env::kLocalSize, s_local_size);
  env.emplace_back(job_env::kCrossRank, s_cross_rank);
  env.emplace_back(job_env::kCrossSize, s_cross_size);
  env.emplace_back(job_env::kHostname, host.name);
  env.emplace_back(job_env::kHostIndex, s_host_index);
  env.emplace_back(job_env::kRendezvous, facts.rendezvous);
  // An empty iface (remote hosts without --network-interfaces) leaves the interface variables
  // unset: libhora then binds on the source address of its route to HORA_RENDEZVOUS, and
  // NCCL/Gloo programs use their own defaults rather than an empty name.
  const bool iface = !facts.iface.empty();
  if (iface) env.emplace_back(job_env::kIface, facts.iface);
  env.emplace_back(job_env::kSecret, facts.secret_hex);
  env.emplace_back(job_env::kStartTimeout, std::to_string(facts.start_timeout.count()));
  if (!facts.log_level.empty()) env.emplace_back(job_env::kLogLevel, facts.log_level);

  env.emplace_back(job_env::kHorovodRank, s_rank);
  env.emplace_back(job_env::kHorovodSize, s_size);
  env.emplace_back(job_env::kHorovodLocalRank, s_local_rank);
  env.emplace_back(job_env::kHorovodLocalSize, s_local_size);
  env.emplace_back(job_env::kHorovodCrossRank, s_cross_rank);
  env.emplace_back(job_env::kHorovodCrossSize, s_cross_size);
  env.emplace_back(job_env::kHorovodHostname, host.name);
  env.emplace_back(job_env::kHorovodController, "gloo");
  env.emplace_back(job_env::kHorovodCpuOperations, "gloo");
  if (iface) env.emplace_back(job_env::kHorovodGlooIface, facts.iface);
  if (facts.horovod_port != 0) {
    env.emplace_back(job_env::kHorovodGlooRendezvousAddr, facts.horovod_addr);
    env.emplace_back(job_env::kHorovodGlooRendezvousPort, std::to_string(facts.horovod_port));
  }

  env.emplace_back(job_env::kTorchRank, s_rank);
  env.emplace_back(job_env::kTorchWorldSize, s_size);
  env.emplace_back(job_env::kTorchLocalRank, s_local_rank);
  env.emplace_back(job_env::kTorchLocalWorldSize, s_local_size);
  env.emplace_back(job_env::kTorchGroupRank, s_host_index);
  env.emplace_back(job_env::kTorchRoleRank, s_rank);
  env.emplace_back(job_env::kTorchGroupWorldSize, std::to_string(table.hosts().size()));
  env.emplace_back(job_env::kTorchRoleName, "default");
  env.emplace_back(job_env::kTorchRoleWorldSize, s_size);
  env.emplace_back(job_env::kTorchelasticRunId, facts.run_id.empty() ? "none" : facts.run_id);
  env.emplace_back(job_env::kTorchelasticRestartCount, std::to_string(facts.restart_count));
  env.emplace_back(job_env::kTorchelasticMaxRestarts, std::to_string(facts.max_restarts));
  env.emplace_back(job_env::kMasterAddr, facts.master_addr);
  env.emplace_back(job_env::kMasterPort, std::to_string(facts.master_port));

  if (iface) {
    env.emplace_back(job_env::kGlooSocketIfname, facts.iface);
    env.emplace_back(job_env::kNcclSocketIfname,
                     facts.nccl_ifnames.empty() ? facts.iface : facts.nccl_ifnames);
  }
  env.emplace_back(job_env::kPythonUnbuffered, "1");
  if (facts.tcp) env.emplace_back(job_env::kNcclIbDisable, "1");

  if (facts.omp_threads_default && r.local_size > 1) env.emplace_back(job_env::kOmpNumThreads, "1");

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
