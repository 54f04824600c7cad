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

// mpirun's --oversubscribe: ranks past the listed slots go one per host in list order, round
// and round, as Open MPI places them by slot (every host then has more ranks than slots).
std::vector<HostSpec> oversubscribed(std::vector<HostSpec> hosts, int np) {
  long long slots = total_slots(hosts);
  for (std::size_t h = 0; slots < np && !hosts.empty(); h = (h + 1) % hosts.size(), ++slots) {
    ++hosts[h].slots;
  }
  return hosts;
}

JobHosts resolve_job_hosts(const Options& options, const Environment& env) {
  std::vector<HostSpec> hosts = listed_hosts(options, env);
  if (options.oversubscribe && options.num_proc) hosts = oversubscribed(hosts, *options.num_proc);
  JobHosts r{RankTable(hosts, RankTable::job_size(hosts, options.num_proc)),
             parse_network_spec(options.network_interfaces)};
  std::vector<std::string> names;
  for (const HostSpec& h : r.table.hosts()) names.push_back(h.name);
  check_spec_hosts(r.spec, names);
  return r;
}

}  // namespace hora::cli
