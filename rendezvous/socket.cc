#include "rendezvous/socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace hora::rdv::net {

namespace {

std::string errno_text(const char* step, int err) {
  return fmt::format("{}: {}", step, std::strerror(err));
}

// poll() timeout for a deadline: -1 without one, otherwise the remaining milliseconds rounded up
// (so we never spin with 0 before the deadline) and 0 once it has passed.
int poll_timeout(std::optional<Clock::time_point> deadline) {
  if (!deadline) return -1;
  auto left = *deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(ms);
}

// Waits for `events`; returns 1 when ready, 0 on deadline, -1 with errno on failure.
int wait_for(int fd, short events, std::optional<Clock::time_point> deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, poll_timeout(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && deadline && Clock::now() < *deadline) continue;  // woke early: wait on
    return n;
  }
}

void tune(int fd) {
  // Failures only weaken latency or dead-peer detection, so they are ignored.
  int one = 1, idle = 10, interval = 5, count = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

}  // namespace

UniqueFd connect_tcp(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                     std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    *why =
        fmt::format("getaddrinfo: {}", rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc));
    return {};
  }
  std::string last = "getaddrinfo: no addresses";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd) {
      last = errno_text("socket", errno);
      continue;
    }
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = errno_text("connect", errno);
        continue;
      }
      int n = wait_for(fd.get(), POLLOUT, deadline);
      if (n < 0) {
        last = errno_text("poll", errno);
        continue;
      }
      if (n == 0) {
        last = "connect: timed out";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last = errno_text("connect", err);
        continue;
      }
    }
    ::freeaddrinfo(res);
    tune(fd.get());
    return fd;
  }
  ::freeaddrinfo(res);
  *why = last;
  return {};
}

IoResult write_all(int fd, std::span<const std::uint8_t> data, Clock::time_point deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data = data.subspan(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int r = wait_for(fd, POLLOUT, deadline);
      if (r < 0) return {IoStatus::kError, errno_text("poll", errno)};
      if (r == 0) return {IoStatus::kTimeout, "send: timed out"};
      continue;
    }
    return {IoStatus::kError, errno_text("send", errno)};
  }
  return {};
}

IoResult read_exact(int fd, std::span<std::uint8_t> out,
                    std::optional<Clock::time_point> deadline) {
  while (!out.empty()) {
    ssize_t n = ::recv(fd, out.data(), out.size(), 0);
    if (n > 0) {
      out = out.subspan(static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) return {IoStatus::kEof, "end of stream"};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int r = wait_for(fd, POLLIN, deadline);
      if (r < 0) return {IoStatus::kError, errno_text("poll", errno)};
      if (r == 0) return {IoStatus::kTimeout, "recv: timed out"};
      continue;
    }
    return {IoStatus::kError, errno_text("recv", errno)};
  }
  return {};
}

}  // namespace hora::rdv::net
