#include "cli/elastic/horovod_elastic.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "cli/base/errors.h"
#include "cli/output/log.h"
#include "cli/spawn/horovod_rendezvous.h"
#include "rendezvous/errors.h"
#include "rendezvous/horovod/http_server.h"
#include "rendezvous/horovod/notify.h"

namespace hora::cli {

namespace hvd = rdv::horovod;

std::string horovod_slot(const std::string& host, int local_rank) {
  return fmt::format("{}:{}", host, local_rank);
}

HorovodElastic::HorovodElastic(boost::asio::io_context& io, std::vector<std::string> bind_addresses,
                               std::vector<std::string> allowed_remote, int most_ranks,
                               HorovodElasticEvents events)
    : io_(io), events_(std::move(events)) {
  hvd::HttpServerOptions options;
  options.bind_addresses = std::move(bind_addresses);
  options.allowed_remote = std::move(allowed_remote);
  options.elastic = true;
  // As a fixed job's (cli/spawn/horovod_rendezvous.cc), for the most ranks the job may have:
  // a held GET keeps its connection open, so every rank may hold one besides its Gloo requests.
  const auto ranks = static_cast<std::size_t>(std::max(1, most_ranks));
  options.max_connections = 4u * ranks + 64u;
  options.reserved_connections = 2u * ranks;
  hvd::HttpServerEvents ev;
  ev.on_rank_seen = [this](int rank, const std::string& peer) {
    if (events_.on_joined) events_.on_joined(rank, peer);
  };
  ev.on_rank_and_size = [this](const std::string& slot, const std::string& peer) {
    launcher_log()->info("Horovod worker {} asks for its place after a reset (from {})", slot,
                         peer);
    if (events_.on_held) events_.on_held(slot);
  };
  ev.on_worker_addresses = [this](const std::string& slot, const std::string& body,
                                  const std::string& peer) {
    on_worker_addresses(slot, body, peer);
  };
  ev.on_rejected = [](const std::string& peer, const std::string& reason) {
    launcher_log()->warn("Horovod's rendezvous refused a request from {}: {}", peer, reason);
  };
  ev.on_rejections_counted = [](const std::string& line) { launcher_log()->warn("{}", line); };
  try {
    server_ =
        std::make_unique<hvd::HttpServer>(io, hvd::ScopePlan{}, std::move(options), std::move(ev));
  } catch (const rdv::Error& e) {
    throw Error(
        fmt::format("{}; a job that does not use Horovod can pass "
                    "--no-horovod-rendezvous",
                    e.what()));
  }
}

HorovodElastic::~HorovodElastic() { stop(); }

std::uint16_t HorovodElastic::port() const { return server_->port(); }

void HorovodElastic::begin_round(const RankTable& table) {
  server_->begin_round(horovod_scope_plan(table));
}

bool HorovodElastic::held(const std::string& slot) const {
  const std::vector<std::string> slots = server_->held_rank_and_size();
  return std::binary_search(slots.begin(), slots.end(), slot);
}

void HorovodElastic::release(const std::string& slot) { server_->release_rank_and_size(slot); }

void HorovodElastic::notify(const std::string& slot, hvd::HostUpdate what,
                            std::string known_address, bool on_this_machine) {
  Pending p{slot, what, std::move(known_address), on_this_machine};
  if (registered_.count(slot) == 0) {
    // Not registered yet (hvd.elastic.run not reached): told when it does. An older pending
    // notice is replaced: the newest round is what matters.
    launcher_log()->info(
        "Horovod worker {} has not registered its notification service yet; "
        "it is told of the new hosts when it does",
        slot);
    pending_ = std::move(p);
    return;
  }
  send(p);
}

void HorovodElastic::on_worker_addresses(const std::string& slot, const std::string& body,
                                         const std::string& peer) {
  try {
    registered_[slot] = hvd::parse_worker_addresses(body);
  } catch (const hvd::PickleError& e) {
    launcher_log()->warn(
        "Horovod worker {} (from {}) registered addresses horarun cannot read: "
        "{}; it cannot be told of new hosts",
        slot, peer, e.what());
    return;
  }
  if (pending_ && pending_->slot == slot) {
    const Pending p = *pending_;
    pending_.reset();
    send(p);
  }
}

void HorovodElastic::send(const Pending& p) {
  const hvd::WorkerAddresses& a = registered_.at(p.slot);
  // The worker drops a timestamp not newer than the last it saw.
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  last_timestamp_ = std::max<std::int64_t>(now, last_timestamp_ + 1);
  const std::string slot = p.slot;
  auto n = hvd::notify_hosts_updated(
      io_, hvd::order_endpoints(a.endpoints, p.known_address, p.on_this_machine), a.key,
      last_timestamp_, p.what, hvd::NotifyOptions{}, [slot](const hvd::NotifyResult& r) {
        if (r.ok) {
          launcher_log()->info("told Horovod worker {} (at {}) that hosts changed", slot,
                               r.endpoint);
        } else {
          launcher_log()->warn(
              "could not tell Horovod worker {} that hosts changed: {}; its "
              "round goes on at the old size until a reset",
              slot, r.error);
        }
      });
  sent_.push_back(std::move(n));
  if (sent_.size() > 16) sent_.erase(sent_.begin());
}

void HorovodElastic::stop() {
  for (const auto& n : sent_) n->cancel();
  sent_.clear();
  if (server_) server_->stop();
}

}  // namespace hora::cli
