#include "runtime/gloo/mesh_context.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <gloo/common/error.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "runtime/core/log.h"
#include "runtime/gloo/socket_peers.h"

namespace hora::detail::gloo {
namespace {

// Threads that switch a context's pairs to sync mode together (make_sync).
constexpr std::size_t kSyncSwitchThreads = 16;
// Gloo slot prefix of make_sync()'s address swap; Gloo's own prefixes are 0x01..0x08,
// ring_reduce_scatter's 0x48.
constexpr std::uint8_t kSyncAddressSlotPrefix = 0x49;

}  // namespace

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
  const auto sockets = connected_sockets();  // one scan of /proc/self/fd for every pair
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
    if (auto socket = socket_at(sockets, local)) {
      const ::gloo::transport::tcp::Address remote(socket->peer);
      std::lock_guard<std::mutex> lock(mutex_);
      members_[i].gloo_names.push_back(remote.str());
    }
  }
}

void MeshContext::make_sync(bool busy_poll, std::chrono::milliseconds timeout) {
  std::vector<int> peers;
  for (int i = 0; i < size; ++i) {
    if (i != rank) peers.push_back(i);
  }
  auto local_of = [&](int i) {
    return dynamic_cast<const ::gloo::transport::tcp::Address&>(
               transportContext_->getPair(i)->address())
        .getSockaddr();
  };

  // While the pairs are still asynchronous: swap the two ends' addresses of each connection.
  const auto bytes = sizeof(sockaddr_storage);
  std::vector<sockaddr_storage> mine(static_cast<std::size_t>(size));
  std::vector<sockaddr_storage> theirs(static_cast<std::size_t>(size));
  auto out = transportContext_->createUnboundBuffer(mine.data(), mine.size() * bytes);
  auto in = transportContext_->createUnboundBuffer(theirs.data(), theirs.size() * bytes);
  const std::uint64_t slot = ::gloo::Slot::build(kSyncAddressSlotPrefix, 0);
  for (int i : peers) {
    mine[i] = local_of(i);
    in->recv(i, slot, i * bytes, bytes);
    out->send(i, slot, i * bytes, bytes);
  }
  for (std::size_t k = 0; k < peers.size(); ++k) in->waitRecv(timeout);
  for (std::size_t k = 0; k < peers.size(); ++k) out->waitSend(timeout);

  // Each setSync() waits for a tick of the device loop (up to 10 ms) to take its socket off the
  // loop; pairs do not share a lock, so a few threads wait for the same ticks together.
  const std::size_t workers = std::min<std::size_t>(peers.size(), kSyncSwitchThreads);
  std::vector<std::exception_ptr> errors(workers);
  {
    std::vector<std::thread> threads;
    for (std::size_t w = 0; w < workers; ++w) {
      threads.emplace_back([&, w] {
        try {
          for (std::size_t k = w; k < peers.size(); k += workers) {
            transportContext_->getPair(peers[k])->setSync(true, busy_poll);
          }
        } catch (...) {
          errors[w] = std::current_exception();
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }

  const auto sockets = connected_sockets();
  std::vector<UniqueFd> found;
  for (int i : peers) {
    const auto socket = socket_at(sockets, mine[i], &theirs[i]);
    if (!socket) {
      // Without the descriptor an abort could not end a blocked read before its timeout.
      throw ::gloo::IoException(
          fmt::format("cannot find the socket of the sync pair for scope rank {} ({} to {}) in "
                      "/proc/self/fd",
                      i, ::gloo::transport::tcp::Address(mine[i]).str(),
                      ::gloo::transport::tcp::Address(theirs[i]).str()));
    }
    UniqueFd copy(::fcntl(socket->fd, F_DUPFD_CLOEXEC, 0));
    if (!copy) {
      throw ::gloo::IoException(
          fmt::format("cannot duplicate the descriptor of the sync pair for scope rank {}: {}", i,
                      std::strerror(errno)));
    }
    found.push_back(std::move(copy));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  sync_sockets_ = std::move(found);
  sync_timeout_ = timeout;
}

int MeshContext::sync_socket(int scope_rank) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::size_t index =
      static_cast<std::size_t>(scope_rank < rank ? scope_rank : scope_rank - 1);
  if (scope_rank == rank || index >= sync_sockets_.size()) return -1;
  return sync_sockets_[index].get();
}

bool MeshContext::is_sync() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !sync_sockets_.empty();
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
    // A sync pair's reader holds the pair's lock inside recv(2) until data, EOF or SO_RCVTIMEO:
    // shutdown(2) gives it EOF now (peers see the connection end too). It never blocks.
    for (const UniqueFd& socket : sync_sockets_) ::shutdown(socket.get(), SHUT_RDWR);
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
