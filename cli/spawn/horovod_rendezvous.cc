#include "cli/spawn/horovod_rendezvous.h"

#include <fmt/format.h>

#include <algorithm>

#include "cli/base/errors.h"
#include "cli/output/log.h"
#include "cli/spawn/supervisor_config.h"
#include "rendezvous/errors.h"
#include "rendezvous/horovod/http_server.h"

namespace hora::cli {

rdv::horovod::ScopePlan horovod_scope_plan(const RankTable& table) {
  rdv::horovod::ScopePlan plan;
  plan.world_size = table.size();
  for (int r = 0; r < table.size(); ++r) {
    const RankInfo& info = table.rank(r);
    plan.add_rank(table.host_of(r).name,
                  {info.rank, info.local_rank, info.local_size, info.cross_rank, info.cross_size});
  }
  return plan;
}

std::vector<std::string> horovod_listen_addresses(const SupervisorConfig& config) {
  std::vector<std::string> out;
  for (const HostNetwork& net : config.host_network) {
    if (std::find(out.begin(), out.end(), net.rendezvous_host) == out.end()) {
      out.push_back(net.rendezvous_host);
    }
  }
  if (out.empty()) out.push_back(config.bind_address);
  return out;
}

HorovodRendezvous::HorovodRendezvous(boost::asio::io_context& io, const RankTable& table,
                                     const SupervisorConfig& config) {
  rdv::horovod::HttpServerOptions options;
  options.bind_addresses = horovod_listen_addresses(config);
  // Every rank keeps at most one connection open at a time; leave room for stray clients, and
  // keep 2 per rank for this machine's ranks (peers from other hosts cannot take those). Peers on
  // this machine must be this user's (the server checks the connecting socket's owner).
  options.max_connections = 4u * static_cast<std::size_t>(table.size()) + 64u;
  options.reserved_connections = 2u * static_cast<std::size_t>(table.size());
  // Peers from other machines: only the job's hosts' addresses (none known: any).
  options.allowed_remote = config.remote_host_addresses;
  rdv::horovod::HttpServerEvents events;
  events.on_rank_seen = [](int rank, const std::string& peer) {
    launcher_log()->info("rank {} reached Horovod's rendezvous from {}", rank, peer);
  };
  events.on_rejected = [](const std::string& peer, const std::string& reason) {
    launcher_log()->warn("Horovod's rendezvous refused a request from {}: {}", peer, reason);
  };
  events.on_rejections_counted = [](const std::string& line) { launcher_log()->warn("{}", line); };
  try {
    server_ = std::make_unique<rdv::horovod::HttpServer>(io, horovod_scope_plan(table),
                                                         std::move(options), std::move(events));
  } catch (const rdv::Error& e) {
    throw Error(
        fmt::format("{}; a job that does not use Horovod can pass "
                    "--no-horovod-rendezvous",
                    e.what()));
  }
}

HorovodRendezvous::~HorovodRendezvous() = default;

std::uint16_t HorovodRendezvous::port() const { return server_->port(); }
const std::set<int>& HorovodRendezvous::ranks_seen() const {
  return server_->store().global_ranks_seen();
}
void HorovodRendezvous::stop() { server_->stop(); }

}  // namespace hora::cli
