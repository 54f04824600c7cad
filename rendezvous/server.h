// The rendezvous server, run by the launcher (horarun) on its Boost.Asio io_context.
//
// Single-threaded: every handler runs on the io_context the server was given; public methods
// may be called from that thread only, except abort_all() and stop(), which post themselves.
// The server keeps the key/value store, barriers and exchanges of one job of `size` ranks, and
// tracks which ranks are connected. A connection that fails authentication, sends a malformed
// or oversized frame or an unknown op is logged and closed; everyone else is unaffected.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <boost/asio/io_context.hpp>

#include "rendezvous/secret.h"
#include "rendezvous/wire.h"

namespace hora::rdv {

struct ServerOptions {
  static constexpr std::size_t kDefaultMaxFrameBytes = 64u << 20;
  static constexpr std::chrono::milliseconds kDefaultAuthTimeout{10000};
  static constexpr std::chrono::milliseconds kDefaultIoTimeout{30000};
  static constexpr std::size_t kDefaultMaxUnauthenticated = 256;

  std::string bind_address = "127.0.0.1";  // an address of the chosen interface
  std::uint16_t port = 0;                  // 0: any free port (read it back with port())
  int size = 1;                            // ranks in the job
  std::array<std::uint8_t, 32> secret{};
  // Header + payload, either direction; from wire::kMinMaxFrameBytes to 4 GiB - 1.
  std::size_t max_frame_bytes = kDefaultMaxFrameBytes;
  // A connection that has not authenticated this long after accept is rejected and closed.
  std::chrono::milliseconds auth_timeout = kDefaultAuthTimeout;
  // Once a frame's header has arrived its payload must follow within this; a queued response
  // must be taken by the peer within this. Otherwise the connection is dropped.
  std::chrono::milliseconds io_timeout = kDefaultIoTimeout;
  // At most this many connections (or the job's size, if larger) may wait to authenticate at
  // once (lowered so they take at most half of the open-file limit left after a reserve for the
  // launcher and its ranks); a
  // new one beyond it makes the server drop the one that has waited longest.
  std::size_t max_unauthenticated = kDefaultMaxUnauthenticated;
};

// What the launcher hears from the server. Every callback runs on the io_context thread.
struct ServerEvents {
  std::function<void(int rank, const std::string& peer)> on_connected;
  // clean: the rank said goodbye before closing. reason: what happened otherwise.
  std::function<void(int rank, bool clean, const std::string& reason)> on_disconnected;
  // A connection was refused: before it authenticated (bad proof, garbage, wrong version,
  // duplicate rank, no AUTH in time), or afterwards for breaking the protocol (garbage, an
  // oversized frame, an unknown op). In the latter case on_disconnected(rank, false, reason)
  // is reported too.
  std::function<void(const std::string& peer, const std::string& reason)> on_rejected;
  // A connection opened with an HTTP request (wire::http_request_start: its start), before
  // on_rejected for it: a Horovod program's Gloo store, pointed at this port.
  std::function<void(const std::string& peer, const std::string& request)> on_http_request;
};

class Server {
 public:
  // Binds and starts accepting. Throws rdv::Error naming the address and port on failure.
  Server(boost::asio::io_context& io, ServerOptions options, ServerEvents events = {});
  ~Server();

  std::uint16_t port() const;
  const std::string& address() const;

  // Ranks that have authenticated at least once (init() reached the server).
  const std::set<int>& ranks_seen() const;
  // Ranks connected right now.
  std::set<int> ranks_connected() const;

  // What the server holds right now, for diagnostics and tests (io thread only). `waits` are
  // requests parked until a key, barrier or exchange completes; `exchanges` are exchanges with
  // uploads held in memory (0 once every exchange has been handed out).
  struct Stats {
    std::size_t connections = 0;  // open sockets, authenticated or not
    // Bytes reserved for frames being received, over every connection: grows as payload bytes
    // arrive, not with the size a header declares.
    std::size_t receive_buffer_bytes = 0;
    std::size_t keys = 0;
    std::size_t waits = 0;
    std::size_t barriers = 0;
    std::size_t exchanges = 0;
  };
  Stats stats() const;
  // The value a rank stored under `key` (SET), or nullopt; io thread only.
  std::optional<std::string> value(const std::string& key) const;

  // Sends ABORT(reason) to every connected rank; later connections get it right after auth.
  void abort_all(const std::string& reason);
  // Elastic jobs (docs/elastic.md): sends RESET(reset) to `rank` if it is connected, and right
  // after its AUTH answer if it connects later. An older round than one already sent is ignored.
  void reset_rank(int rank, const wire::Reset& reset);
  // Closes the acceptor and every connection.
  void stop();

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace hora::rdv
