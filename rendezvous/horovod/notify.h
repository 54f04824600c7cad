// The launcher's client of a Horovod worker's notification service (docs/rendezvous.md,
// "Elastic jobs"): how horovodrun's elastic driver tells rank 0 that hosts were added or removed,
// so that every rank stops at its next commit() and re-initialises.
//
// Each worker started by `hvd.elastic.run` listens on a random port of every interface (or of
// HOROVOD_GLOO_IFACE's only) and PUTs those addresses with a fresh 32-byte key to
// /worker_addresses/<host>:<local rank> (pickle.h reads them). One request per connection, one
// reply, then the worker closes; both directions are framed alike:
//   HMAC-SHA256(key, body) (32 bytes) || length of body (int32, little-endian) || body (pickle)
// The request body is hosts_updated_pickle(); the worker answers AckResponse. A reply with a
// valid HMAC proves the worker's own service answered (only it and the launcher know the key).
//
// Runs on the caller's io_context, single-threaded, like the HTTP server: the addresses are
// tried in order, each with a connect timeout and an I/O timeout, in up to `attempts` passes
// `retry_delay` apart (horovodrun tries each address three times), all within one deadline.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/horovod/pickle.h"

namespace hora::rdv::horovod {

struct NotifyOptions {
  std::chrono::milliseconds connect_timeout{3000};  // per address and attempt
  std::chrono::milliseconds io_timeout{10000};      // send the request and read the reply
  std::chrono::milliseconds deadline{30000};        // every attempt together
  int attempts = 3;                                 // passes over the addresses
  std::chrono::milliseconds retry_delay{500};       // between passes
  std::size_t max_reply_bytes = 4096;               // AckResponse's pickle is under 100
};

struct NotifyResult {
  bool ok = false;
  std::string endpoint;  // "ip:port" of the address that answered (ok), or tried last
  std::string reply;     // ok: the reply's pickle, its HMAC checked
  // !ok: what failed, each address with its step: "notifying the worker's notification service
  // failed at every address: 10.0.0.2:4711 (eth0): connect: Connection refused; ..."
  std::string error;
};

// A notification in flight. cancel() stops it and closes its socket; `done` is then never
// called. Dropping the handle does not cancel it.
class Notification {
 public:
  virtual ~Notification() = default;
  virtual void cancel() = 0;
};

using NotifyDone = std::function<void(const NotifyResult&)>;

// Sends `body` framed with `key` to the first of `endpoints` that answers and calls `done` once,
// on the io_context's thread, with the worker's reply or the error (never from inside this
// call). An empty `endpoints` fails at once (through `done`).
std::shared_ptr<Notification> send_to_worker(boost::asio::io_context& io,
                                             std::vector<WorkerEndpoint> endpoints,
                                             const std::array<std::uint8_t, 32>& key,
                                             std::string body, NotifyOptions options,
                                             NotifyDone done);

// HostsUpdatedRequest(timestamp, res) to a worker that registered `worker` (its PUT
// /worker_addresses body, parsed), trying `endpoints` (order_endpoints() of its addresses).
// A reply other than AckResponse fails, naming what came back.
std::shared_ptr<Notification> notify_hosts_updated(boost::asio::io_context& io,
                                                   std::vector<WorkerEndpoint> endpoints,
                                                   const std::array<std::uint8_t, 32>& key,
                                                   std::int64_t timestamp, HostUpdate res,
                                                   NotifyOptions options, NotifyDone done);

// The order to try a worker's addresses in: those equal to `known_address` (the address the
// launcher reaches the worker's host at: its agent's or SSH address) first, then the other
// non-loopback ones in the worker's order; loopback ones last, and only when the worker runs on
// this machine (a remote worker's 127.0.0.1 is this machine's).
std::vector<WorkerEndpoint> order_endpoints(const std::vector<WorkerEndpoint>& endpoints,
                                            std::string_view known_address,
                                            bool worker_on_this_machine);

}  // namespace hora::rdv::horovod
