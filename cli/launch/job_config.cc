#include "cli/launch/job_config.h"

#include <cstdlib>
#include <optional>

#include "cli/output/log.h"
#include "cli/spawn/env_forwarding.h"
#include "common/job_environment.h"

namespace hora::cli {

SupervisorConfig::StallCheck stall_check(const JobFacts& facts, const Environment& env) {
  auto setting = [&](const char* name) -> std::optional<double> {
    for (const EnvBlock* block : {&facts.forwarded, &facts.tuning}) {
      for (const auto& [k, v] : *block) {
        if (k == name) return std::strtod(v.c_str(), nullptr);
      }
    }
    if (const auto it = env.find(name); it != env.end()) {
      return std::strtod(it->second.c_str(), nullptr);
    }
    return std::nullopt;
  };
  SupervisorConfig::StallCheck stall;
  stall.enabled = setting(job_env::kStallCheckDisable).value_or(0) == 0;
  stall.warning_seconds = setting(job_env::kStallCheckSeconds).value_or(stall.warning_seconds);
  stall.shutdown_seconds = setting(job_env::kStallShutdownSeconds).value_or(0);
  if (!(stall.warning_seconds > 0)) stall.enabled = false;
  return stall;
}

SupervisorConfig job_config(const Options& options, const LaunchContext& ctx,
                            const RankTable& table) {
  SupervisorConfig config;
  config.command = options.command;
  config.cwd = ctx.cwd;
  config.verbose = options.verbose;
  config.facts.start_timeout = options.start_timeout;
  config.facts.log_level = options.log_level;
  config.facts.tcp = options.tcp;
  config.facts.tuning = options.tuning;
  config.facts.forwarded = options.env_forward;
  config.facts.max_restarts = options.max_restarts;
  config.horovod_rendezvous = options.horovod_rendezvous;
  apply_launcher_environment(ctx.env, options, table, config.facts);
  config.stall = stall_check(config.facts, ctx.env);
  for (const auto& [name, value] : options.env_forward) {
    if (is_contract_variable(name)) {
      launcher_log()->warn("-x {} overrides the value horarun sets for every rank", name);
    }
  }
  return config;
}

SupervisorConfig supervisor_config(const Options& options, const LaunchContext& ctx,
                                   const RankTable& table, const JobNetwork& network,
                                   const RemotePlan& plan) {
  SupervisorConfig config = job_config(options, ctx, table);
  apply_job_network(network, table, plan, config);
  for (const auto& [index, host] : plan.hosts) {
    launcher_log()->info("{}: reaches the launcher at {}", host.describe(),
                         config.host_network.at(static_cast<std::size_t>(index)).rendezvous_host);
  }
  return config;
}

}  // namespace hora::cli
