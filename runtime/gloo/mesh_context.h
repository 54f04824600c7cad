// A gloo::Context whose pairs hora connected itself (see mesh.h), for one scope: the global
// group, this host's ranks (local) or the ranks sharing this local_rank (cross).
//
// Gloo's algorithms (allreduce, allgatherv, ...) only need a gloo::Context with a device and a
// transport context; connectFullMesh is the usual way to get one, and it is exactly what hora
// avoids (every rank reads every other rank's full address list). MeshContext is handed the
// transport context once its pairs exist, so the abort path can reach them while they connect.
//
// Threading: collectives run on the caller's thread; fail() may be called from any thread (the
// rendezvous reader thread on abort) and wakes every operation blocked on this context.
//
// Sync mode (make_sync, the small-allreduce contexts of sync_policy.h): Gloo's tcp pair then
// reads in the caller's thread, holding the pair's lock, on a blocking socket whose SO_RCVTIMEO
// is the pair's timeout (or spinning on MSG_DONTWAIT with busy polling), instead of the device
// thread reading for it. Only bound buffers work there (unbound ones enforce async mode), and
// Gloo's own wake-up (a timed-out wait signalling the pairs) would wait for that lock; fail()
// first shuts the sockets down, which ends the blocked read at once ("Connection closed").
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gloo/context.h>

#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include "common/unique_fd.h"

namespace hora::detail::gloo {

// What this rank knows about one member of a scope, for error messages.
struct MeshPeer {
  int global_rank = -1;
  std::string hostname;  // HORA_HOSTNAME of that rank
  std::string endpoint;  // its Gloo listening address for this pair, "ip:port" or "[v6]:port"
  // How Gloo prints this peer in its exception messages ("[ip]:port", port in network byte
  // order): its listening address and, when this rank accepted, the connection's peer address.
  std::vector<std::string> gloo_names;
};

class MeshContext : public ::gloo::Context {
 public:
  // members[i] describes scope rank i (members[rank] is this rank).
  MeshContext(int rank, std::vector<MeshPeer> members);
  ~MeshContext() override;

  // Installs the device and the transport context, whose pairs must all exist (not yet
  // connected): their listening addresses are recorded here.
  void attach(std::shared_ptr<::gloo::transport::Device> device,
              std::shared_ptr<::gloo::transport::Context> transport);

  ::gloo::transport::Context& transport() { return *transportContext_; }

  // This rank's listening address for the pair with scope rank i (Gloo's opaque bytes).
  const std::vector<char>& own_address(int scope_rank) const {
    return own_addresses_.at(scope_rank);
  }

  // Records where scope rank `scope_rank` listens, once the exchange told us.
  void describe_peer(int scope_rank, std::string endpoint, std::string gloo_name);

  // Call after every pair connected: learns the peer addresses Gloo will print for pairs
  // this rank accepted (see socket_peers.h).
  void record_connected_peers();

  // Call once after record_connected_peers() and before any operation: switches every pair to
  // Gloo's sync mode (busy_poll: spin on the socket instead of sleeping in recv) and records
  // each pair's socket for fail(). First each side tells the other its end of their connection
  // (one message per pair, waiting at most `timeout`), so that the socket is found by both of
  // its addresses. Throws what Gloo throws (a pair closed, a timeout).
  void make_sync(bool busy_poll, std::chrono::milliseconds timeout);
  bool is_sync() const;

  // Sync mode: a descriptor of the connection to scope rank `scope_rank` (the duplicate fail()
  // shuts down), for pair_swap's own reads and writes between Gloo's messages; -1 before
  // make_sync. Valid while this context lives.
  int sync_socket(int scope_rank) const;
  // The timeout make_sync() was given: the pairs' reads and writes wait at most this long.
  std::chrono::milliseconds sync_timeout() const { return sync_timeout_; }

  // A copy: names are added while other threads may read them.
  MeshPeer member(int scope_rank) const;

  // Finds the scope rank a Gloo error message talks about; -1 when it names none of them.
  int peer_of(const std::string& gloo_message) const;

  // Fails every pending and later operation on this context with a gloo::IoException and
  // closes its connections, so peers see them close. Thread-safe; idempotent.
  void fail(const std::string& reason);

 private:
  std::vector<MeshPeer> members_;
  std::vector<std::vector<char>> own_addresses_;
  mutable std::mutex mutex_;  // guards members_ (names grow while errors are being matched)
  bool failed_ = false;
  // Sync mode: a duplicate of each pair's descriptor, for fail()'s shutdown(2), which acts on
  // the socket whichever descriptor names it. Not Gloo's own descriptor: Gloo may close that on
  // another thread (a failing operation) while fail() runs, and the number could then name
  // another file (ThreadSanitizer reported fail()'s fstat() racing Gloo's close()). The
  // duplicate keeps a socket Gloo closed open until this context is destroyed, as GlooBackend
  // keeps a failed context's other connections open anyway (gloo_backend.cc).
  // One per other scope rank, in scope-rank order (this rank's own is left out).
  std::vector<UniqueFd> sync_sockets_;  // guarded by mutex_ (the abort may come during make_sync)
  std::chrono::milliseconds sync_timeout_{0};  // written by make_sync before any operation
};

}  // namespace hora::detail::gloo
