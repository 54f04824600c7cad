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
#pragma once

#include <sys/socket.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>

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
};

}  // namespace hora::detail::gloo
