#include "runtime/gloo/mesh_context.h"

#include <cctype>
#include <chrono>
#include <utility>

#include <gloo/common/error.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/unbound_buffer.h>

#include "runtime/core/log.h"
#include "runtime/gloo/socket_peers.h"

namespace hora::detail::gloo {

MeshContext::MeshContext(int rank, std::vector<MeshPeer> members)
    : ::gloo::Context(rank, static_cast<int>(members.size())), members_(std::move(members)) {}

MeshContext::~MeshContext() = default;

void MeshContext::attach(std::shared_ptr<::gloo::transport::Device> device,
                         std::shared_ptr<::gloo::transport::Context> transport) {
  device_ = std::move(device);
  transportContext_ = std::move(transport);
  own_addresses_.assign(static_cast<std::size_t>(size), {});
  for (int i = 0; i < size; ++i) {
    if (i != rank) own_addresses_[i] = transportContext_->getPair(i)->address().bytes();
  }
}

MeshPeer MeshContext::member(int scope_rank) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return members_.at(static_cast<std::size_t>(scope_rank));
}

void MeshContext::describe_peer(int scope_rank, std::string endpoint, std::string gloo_name) {
  std::lock_guard<std::mutex> lock(mutex_);
  MeshPeer& peer = members_.at(static_cast<std::size_t>(scope_rank));
  peer.endpoint = std::move(endpoint);
  peer.gloo_names.push_back(std::move(gloo_name));
}

void MeshContext::record_connected_peers() {
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    // A pair that accepted keeps its listening address as its local address; a pair that
    // connected out got an ephemeral one, and Gloo then prints the peer's listening address,
    // which describe_peer() recorded already.
    const ::gloo::transport::tcp::Address listening(own_addresses_[i]);
    const auto& now = dynamic_cast<const ::gloo::transport::tcp::Address&>(
        transportContext_->getPair(i)->address());
    auto local = now.getSockaddr();
    if (!same_endpoint(listening.getSockaddr(), local)) continue;
    if (auto peer = peer_of_local_address(local)) {
      const ::gloo::transport::tcp::Address remote(*peer);
      std::lock_guard<std::mutex> lock(mutex_);
      members_[i].gloo_names.push_back(remote.str());
    }
  }
}

int MeshContext::peer_of(const std::string& message) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    for (const std::string& name : members_[i].gloo_names) {
      // "[127.0.0.1]:3921" must not match inside "[127.0.0.1]:39211".
      for (auto at = message.find(name); at != std::string::npos; at = message.find(name, at + 1)) {
        const auto end = at + name.size();
        if (end == message.size() || !std::isdigit(static_cast<unsigned char>(message[end]))) {
          return i;
        }
      }
    }
  }
  return -1;
}

void MeshContext::fail(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_ || !transportContext_) return;
    failed_ = true;
  }
  // Gloo has one public way to fail every operation of a transport context at once: a wait
  // that times out, which signals every pair ("Application timeout caused pair closure"),
  // wakes all their pending sends and receives, and closes their sockets (peers see EOF). A
  // zero-byte buffer nobody sends to times out after 1 ms. gloo::Context::closeConnections()
  // alone would close the sockets but leave this rank's own waits blocked until their timeout.
  auto probe = transportContext_->createUnboundBuffer(nullptr, 0);
  try {
    probe->waitRecv(nullptr, std::chrono::milliseconds(1));
  } catch (const ::gloo::IoException&) {
    // Expected: this is the timeout that signalled the pairs. Callers report `reason`.
  }
  closeConnections();
  log().debug("Gloo context of {} ranks failed on purpose: {}", size, reason);
}

}  // namespace hora::detail::gloo
