#include "cli/launch/job_hosts.h"

#include <string>

#include "cli/hosts/slurm_allocation.h"
#include "cli/network/choice.h"

namespace hora::cli {

std::vector<HostSpec> listed_hosts(const Options& options, const Environment& env) {
  check_not_srun_task(env);  // `srun -n2 horarun ...` would run two jobs
  if (options.hosts_from_allocation) return slurm_hosts(env).value_or(std::vector<HostSpec>{});
  if (!options.hostfile.empty()) return read_hostfile(options.hostfile);
  if (!options.hosts.empty()) return parse_host_list(options.hosts);
  return {HostSpec{"", "localhost", options.num_proc.value_or(1)}};
}

JobHosts resolve_job_hosts(const Options& options, const Environment& env) {
  const std::vector<HostSpec> hosts = listed_hosts(options, env);
  JobHosts r{RankTable(hosts, RankTable::job_size(hosts, options.num_proc)),
             parse_network_spec(options.network_interfaces)};
  std::vector<std::string> names;
  for (const HostSpec& h : r.table.hosts()) names.push_back(h.name);
  check_spec_hosts(r.spec, names);
  return r;
}

}  // namespace hora::cli
