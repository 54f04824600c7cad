#include "runtime/gloo/pair_swap.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <gloo/common/error.h>

namespace hora::detail::gloo {

namespace {

// How Gloo names a peer in its errors, so that MeshContext::peer_of finds it in ours.
std::string peer_name(const MeshContext& context, int peer) {
  const MeshPeer member = context.member(peer);
  return member.gloo_names.empty() ? member.endpoint : member.gloo_names.front();
}

[[noreturn]] void fail(const MeshContext& context, int peer, const std::string& what) {
  throw ::gloo::IoException(fmt::format("pair swap with {}: {}", peer_name(context, peer), what));
}

bool would_block(int error) { return error == EAGAIN || error == EWOULDBLOCK || error == EINTR; }

}  // namespace

void pair_swap(MeshContext& context, int peer, unsigned char* data, std::size_t count,
               std::size_t element_size, ReduceFn reduce, std::vector<unsigned char>& inbox) {
  const std::size_t bytes = count * element_size;
  if (bytes == 0) return;
  const int fd = context.sync_socket(peer);
  if (fd < 0) fail(context, peer, "the pair is not in sync mode");
  if (inbox.size() < bytes) inbox.resize(bytes);
  unsigned char* theirs = inbox.data();
  // The lower scope rank's data is the reduction's first operand on both sides.
  const bool mine_first = context.rank < peer;
  const auto timeout = context.sync_timeout();

  std::size_t sent = 0;
  std::size_t received = 0;
  std::size_t reduced = 0;  // elements
  auto last_progress = std::chrono::steady_clock::now();
  while (sent < bytes || received < bytes || reduced < count) {
    bool moved = false;
    if (sent < bytes) {
      const ssize_t n = ::send(fd, data + sent, bytes - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
        moved = true;
      } else if (n < 0 && !would_block(errno)) {
        fail(context, peer, std::strerror(errno));
      }
    }
    if (received < bytes) {
      const ssize_t n = ::recv(fd, theirs + received, bytes - received, MSG_DONTWAIT);
      if (n > 0) {
        received += static_cast<std::size_t>(n);
        moved = true;
      } else if (n == 0) {
        fail(context, peer, "Connection closed by peer");
      } else if (!would_block(errno)) {
        fail(context, peer, std::strerror(errno));
      }
    }
    // What both sides have of an element is reduced at once; a sent byte is the kernel's copy,
    // so the result may overwrite it.
    const std::size_t ready = std::min(sent, received) / element_size;
    if (ready > reduced) {
      const std::size_t at = reduced * element_size;
      if (mine_first) {
        reduce(data + at, data + at, theirs + at, ready - reduced);
      } else {
        reduce(data + at, theirs + at, data + at, ready - reduced);
      }
      reduced = ready;
      moved = true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (moved) {
      last_progress = now;
      continue;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(timeout - (now - last_progress));
    if (timeout.count() > 0 && left.count() <= 0) {
      fail(context, peer,
           fmt::format("Read timeout after {} ms without progress", timeout.count()));
    }
    pollfd wait{fd, 0, 0};
    if (sent < bytes) wait.events |= POLLOUT;
    if (received < bytes) wait.events |= POLLIN;
    // At most a second at a time: the loop checks the deadline again.
    const auto wait_ms = timeout.count() > 0 ? std::min<long long>(left.count() + 1, 1000) : 1000;
    const int rc = ::poll(&wait, 1, static_cast<int>(wait_ms));
    if (rc < 0 && errno != EINTR) fail(context, peer, std::strerror(errno));
  }
}

}  // namespace hora::detail::gloo
