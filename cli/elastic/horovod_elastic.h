// Horovod's elastic rendezvous in an elastic job (docs/elastic.md, "Horovod elastic programs";
// docs/design/horovod-elastic-plan.md): what horovodrun's elastic driver does for
// `hvd.elastic.run` programs, on the supervisor's io thread.
//
// One HTTP server (rendezvous/horovod/http_server.h, elastic mode) lives as long as the job, on
// one port: a survivor's HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT never change, while hora's own
// rendezvous has a server per round. At each round the supervisor swaps the store's plan
// (begin_round). A survivor that re-initialises after a reset asks GET /rank_and_size/<slot>;
// its request is held (reported through on_held) until the supervisor releases it once every
// survivor of the round asked (horovodrun's barrier), so that no Gloo store timeout runs while
// the slower ones notice the reset. A slot the round dropped is answered "-1,..." at once. A
// rank of the round that stored its address in scope `global` has joined it (on_joined).
//
// Rank 0 of the running round hears of added hosts through its notification service
// (rendezvous/horovod/notify.h): the addresses each worker PUTs to /worker_addresses/<slot>
// are kept by slot, and a notification for a slot that has not registered yet is sent when it
// does.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/hosts/rank_table.h"
#include "rendezvous/horovod/pickle.h"

namespace hora::rdv::horovod {
class HttpServer;
class Notification;
}  // namespace hora::rdv::horovod

namespace hora::cli {

// "<host>:<local rank>": the key of a worker's slot scopes (HOROVOD_HOSTNAME and
// HOROVOD_LOCAL_RANK of the round it last initialised in).
std::string horovod_slot(const std::string& host, int local_rank);

struct HorovodElasticEvents {
  // A rank of the current round stored its address in scope `global` (it reached hvd.init()).
  std::function<void(int rank, const std::string& peer)> on_joined;
  // A worker's GET /rank_and_size/<slot> is held.
  std::function<void(const std::string& slot)> on_held;
};

class HorovodElastic {
 public:
  // Listens on `bind_addresses` (one port for all); `allowed_remote` as HttpServerOptions' (the
  // hosts' addresses; empty: any). `most_ranks` sizes the connection limits. Throws Error
  // naming the address when it cannot listen.
  HorovodElastic(boost::asio::io_context& io, std::vector<std::string> bind_addresses,
                 std::vector<std::string> allowed_remote, int most_ranks,
                 HorovodElasticEvents events);
  ~HorovodElastic();

  std::uint16_t port() const;
  // The next round's plan; held requests of slots `table` lacks are answered "-1,..." now.
  void begin_round(const RankTable& table);
  bool held(const std::string& slot) const;
  // Answers the held GETs of `slot` from the current round's plan.
  void release(const std::string& slot);
  // Tells the worker registered under `slot` (rank 0 of the running round) that hosts changed:
  // now, or when it registers. `known_address`: the address its host is reached at (empty:
  // this machine).
  void notify(const std::string& slot, rdv::horovod::HostUpdate what, std::string known_address,
              bool on_this_machine);
  void stop();

 private:
  struct Pending {
    std::string slot;
    rdv::horovod::HostUpdate what = rdv::horovod::HostUpdate::kAdded;
    std::string known_address;
    bool on_this_machine = false;
  };
  void on_worker_addresses(const std::string& slot, const std::string& body,
                           const std::string& peer);
  void send(const Pending& p);

  boost::asio::io_context& io_;
  HorovodElasticEvents events_;
  std::unique_ptr<rdv::horovod::HttpServer> server_;
  std::map<std::string, rdv::horovod::WorkerAddresses> registered_;  // by slot
  std::optional<Pending> pending_;
  std::vector<std::shared_ptr<rdv::horovod::Notification>> sent_;
  std::int64_t last_timestamp_ = 0;
};

}  // namespace hora::cli
