// Blocking rendezvous client, used by the runtime (libhora) in every rank.
//
// One TCP connection per rank, opened by init() and kept until shutdown(): it carries
// requests (set/get/add/del/barrier/exchange) and is also the rank's liveness signal and the
// launcher's abort channel. A background reader thread receives every frame: responses are
// matched to the waiting request by request id; an ABORT frame from the server calls the abort
// handler (from the reader thread) and fails every request in flight or made afterwards.
//
// Every call takes a timeout and throws rdv::TimeoutError naming what was still missing when it
// passes. The connection is authenticated: see docs/rendezvous.md.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rendezvous/errors.h"
#include "rendezvous/secret.h"
#include "rendezvous/wire.h"

namespace hora::rdv {

using Bytes = std::vector<std::uint8_t>;

struct ClientOptions {
  static constexpr std::chrono::milliseconds kDefaultConnectTimeout{30000};
  static constexpr std::size_t kDefaultMaxFrameBytes = 64u << 20;  // as ServerOptions

  std::string host;  // the server's address or name
  std::uint16_t port = 0;
  int rank = 0;
  int size = 1;
  Secret secret{};
  // Connecting retries (connection refused while the server is not up yet) until this passes.
  std::chrono::milliseconds connect_timeout = kDefaultConnectTimeout;
  // Largest frame (header + payload) sent or accepted; a bigger request throws ProtocolError.
  std::size_t max_frame_bytes = kDefaultMaxFrameBytes;
};

// What Client::gather returns: every rank's record and this rank's column of fixed-width
// slices, as views into the answer it owns (moving the result keeps them valid).
struct GatherResult {
  Bytes payload;
  Bytes records_buffer;                                // the records, decoded
  std::vector<std::span<const std::uint8_t>> records;  // records[j]: rank j's record
  std::size_t width = 0;
  std::span<const std::uint8_t> column;  // size x width bytes
  // What rank j addressed to this rank.
  std::span<const std::uint8_t> slice(int j) const {
    return column.subspan(static_cast<std::size_t>(j) * width, width);
  }
};

class Client {
 public:
  // Connects, authenticates and starts the reader thread. Throws ConnectError (with host:port,
  // every attempt's reason) or AuthError.
  static std::unique_ptr<Client> connect(const ClientOptions& options);
  virtual ~Client();  // closes the connection (without goodbye: the server sees a drop)

  void set(const std::string& key, const Bytes& value, std::chrono::milliseconds timeout);
  // Blocks until the key exists or the timeout passes.
  Bytes get(const std::string& key, std::chrono::milliseconds timeout);
  // Adds delta to a 64-bit counter (created at 0) and returns the new value.
  std::int64_t add(const std::string& key, std::int64_t delta, std::chrono::milliseconds timeout);
  void del(const std::string& key, std::chrono::milliseconds timeout);
  // Returns once every rank of the job has entered the barrier with this name.
  void barrier(const std::string& name, std::chrono::milliseconds timeout);
  // All-to-all of small blobs: slices[i] is addressed to rank i (slices.size() == size).
  // Returns the column addressed to this rank: result[j] is what rank j addressed to it.
  // Completes once every rank has uploaded for this name.
  std::vector<Bytes> exchange(const std::string& name, const std::vector<Bytes>& slices,
                              std::chrono::milliseconds timeout);
  // Every rank uploads one record (for everyone) and one `width`-byte slice per rank (`slices`:
  // size x width bytes, slice i addressed to rank i). Returns every rank's record and the column
  // addressed to this rank. Completes once every rank has uploaded for this name; the server
  // refuses (rdv::Error) a slice width that differs from other ranks'.
  GatherResult gather(const std::string& name, std::span<const std::uint8_t> record,
                      std::size_t width, std::span<const std::uint8_t> slices,
                      std::chrono::milliseconds timeout);
  // Tells the server this rank is leaving on purpose, then closes the connection. at_exit: it
  // leaves from an exit handler, not from hora::shutdown() (wire::kGoodbyeAtExit).
  void goodbye(bool at_exit = false);

  // Called once, from the reader thread, when the server sends ABORT or the connection drops
  // unexpectedly. The argument is the launcher's reason (or what happened to the connection).
  // If that already happened when the handler is set, it is called at once from the caller's
  // thread. The handler must not destroy the Client (the destructor joins the reader thread).
  void set_abort_handler(std::function<void(const std::string& reason)> handler);

  // Called from the reader thread for every RESET the server sends (an elastic job's next round,
  // docs/elastic.md), before the abort handler when the reset interrupts. RESET frames that came
  // before the handler was set are passed to it when it is set, from the caller's thread.
  void set_reset_handler(std::function<void(const wire::Reset& reset)> handler);

  int rank() const;
  const std::string& server() const;  // "host:port"

 protected:
  Client() = default;
};

}  // namespace hora::rdv
