// Horovod's Gloo HTTP rendezvous for one job (rendezvous/horovod/http_server.h), as the
// supervisor runs it: the scopes come from the rank table, the server listens on the addresses
// the job's hosts reach the launcher at, and lives as long as the supervisor's job
// (docs/rendezvous.md, "Horovod's HTTP rendezvous").
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/hosts/rank_table.h"
#include "rendezvous/horovod/scope_plan.h"

namespace hora::rdv::horovod {
class HttpServer;
}

namespace hora::cli {

struct SupervisorConfig;

// global, local_<host name> and cross_<local rank> with their sizes. The host names are the
// rank table's, byte for byte what HOROVOD_HOSTNAME carries (cli/spawn/rank_environment.cc).
rdv::horovod::ScopePlan horovod_scope_plan(const RankTable& table);

// The addresses to listen on: every host's rendezvous_host (one each, in order), or
// bind_address for all-local jobs. Never a wildcard when the hosts name their addresses.
std::vector<std::string> horovod_listen_addresses(const SupervisorConfig& config);

class HorovodRendezvous {
 public:
  // Throws Error naming the address when it cannot listen.
  HorovodRendezvous(boost::asio::io_context& io, const RankTable& table,
                    const SupervisorConfig& config);
  ~HorovodRendezvous();

  std::uint16_t port() const;
  // Ranks that stored their address in scope `global` (they reached hvd.init()).
  const std::set<int>& ranks_seen() const;
  void stop();

 private:
  std::unique_ptr<rdv::horovod::HttpServer> server_;
};

}  // namespace hora::cli
