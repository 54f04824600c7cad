// Horovod's Gloo rendezvous over HTTP (Boost.Beast), served from the launcher's io_context.
//
// Single-threaded like rdv::Server: every handler runs on the io_context given; call stop()
// and the accessors from that thread. The request logic is rendezvous/horovod/store.h; this
// file only reads requests, hands them to the store and writes the replies.
//
// Horovod's protocol has no authentication (docs/rendezvous.md): the server listens only on the
// addresses given (the ones the job's hosts reach the launcher at) and only while it exists, and
// it checks who connects before reading a byte: a connection from a socket of this machine is
// kept only when that socket belongs to `owner_uid` (socket_owner.h), one from another host only
// when its address is one of `allowed_remote`. Every refusal goes through a rate limit
// (common/log_throttle.h): one line per peer host and kind per second, then a count.
// A request that cannot be parsed (a malformed request line, headers over 8 KiB), a body over
// the store's limit, or a connection idle longer than io_timeout is answered when possible
// (400/413) and its connection closed; other clients are unaffected.
//
// Elastic jobs (options.elastic; docs/rendezvous.md, "Elastic jobs"): a worker's
// `GET /rank_and_size/<host>:<local rank>` for a slot of the current plan is held, without a
// timeout, and reported through on_rank_and_size; the launcher answers it with
// release_rank_and_size(slot) or release_round(), from the plan current then. A slot the current
// plan lacks is answered "-1,-1,-1,-1,-1,-1" (removed) at once, and so is every held request whose
// slot begin_round() drops. begin_round() swaps the plan between rounds (the store is cleared, as
// horovodrun's rendezvous.init does); on_worker_addresses reports each stored PUT
// /worker_addresses (pickle.h reads its body, notify.h uses it). A fixed job (elastic unset)
// answers rank_and_size at once from its one plan.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "rendezvous/horovod/store.h"

namespace hora::rdv::horovod {

struct HttpServerOptions {
  static constexpr std::chrono::milliseconds kDefaultIoTimeout{30000};
  static constexpr std::size_t kDefaultMaxConnections = 512;

  // Every address to listen on, all with the same port. Empty: 127.0.0.1.
  std::vector<std::string> bind_addresses;
  std::uint16_t port = 0;  // 0: a free port (read it back with port())
  // A request must arrive in full within this of the previous one (or of accept), and a reply
  // must be taken within it.
  std::chrono::milliseconds io_timeout = kDefaultIoTimeout;
  // Connections beyond this are closed right after accept.
  std::size_t max_connections = kDefaultMaxConnections;
  // Of max_connections, this many are kept for peers of this machine owned by owner_uid (the
  // job's local ranks): peers from other hosts may hold only max_connections - reserved.
  std::size_t reserved_connections = 0;
  // The user whose sockets on this machine may connect. Unset: this process's effective uid.
  std::optional<uid_t> owner_uid;
  // Addresses of other hosts that may connect (the job's hosts). Empty: any other host.
  std::vector<std::string> allowed_remote;
  // Hold rank_and_size GETs until the launcher releases them (elastic jobs).
  bool elastic = false;
};

struct HttpServerEvents {
  // A request or connection was refused; `reason` says why. Unset: logged as a warning on the
  // "rendezvous" logger.
  // Rate-limited: one call per peer host and kind per second; the rest are counted and reported
  // through on_rejections_counted when the second ends.
  std::function<void(const std::string& peer, const std::string& reason)> on_rejected;
  // The summary line of refusals only counted. Unset: a warning on the "rendezvous" logger.
  std::function<void(const std::string& line)> on_rejections_counted;
  // A global rank stored its address in scope `global` for the first time.
  std::function<void(int rank, const std::string& peer)> on_rank_seen;
  // Elastic mode: a worker asked GET /rank_and_size/<slot> (it re-initialises after a reset) and
  // its request is now held. The handler may release it at once (release_rank_and_size(slot)).
  std::function<void(const std::string& slot, const std::string& peer)> on_rank_and_size;
  // A worker stored its notification service's addresses: `body` as sent to
  // PUT /worker_addresses/<slot> and answered 200 (parse_worker_addresses() reads it).
  std::function<void(const std::string& slot, const std::string& body, const std::string& peer)>
      on_worker_addresses;
};

class HttpServer {
 public:
  // Binds every address and starts accepting. Throws rdv::Error naming the address on failure.
  HttpServer(boost::asio::io_context& io, ScopePlan plan, HttpServerOptions options = {},
             HttpServerEvents events = {});
  ~HttpServer();

  std::uint16_t port() const;
  const std::vector<std::string>& addresses() const;
  const Store& store() const;
  std::size_t connections() const;

  // Closes the listeners and every connection, held requests included (their workers see the
  // connection close; Horovod's retries then fail to connect).
  void stop();

  // Elastic mode. begin_round: the next round's plan; held requests stay held, except those of
  // slots `plan` lacks, answered "-1,..." now. global ranks are reported by on_rank_seen again.
  void begin_round(ScopePlan plan);
  // Answers the held GETs of `slot` from the current plan; returns how many.
  std::size_t release_rank_and_size(const std::string& slot);
  // Answers every held GET from the current plan; returns how many.
  std::size_t release_round();
  // The slots of the held GETs, one per request, sorted.
  std::vector<std::string> held_rank_and_size() const;

  // Lets connections from `address` in (a host that joined the job later). allowed_remote empty
  // means any host: adding the first address restricts to it.
  void allow_remote(const std::string& address);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace hora::rdv::horovod
