// Blocking-with-deadline POSIX socket helpers for the rendezvous client (the runtime does not
// use Asio). Sockets are non-blocking; every wait is a poll() bounded by a steady_clock deadline.
// Another thread may shutdown() the socket to wake a reader waiting without a deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "common/unique_fd.h"

namespace hora::rdv::net {

using Clock = std::chrono::steady_clock;

enum class IoStatus { kOk, kEof, kTimeout, kError };

struct IoResult {
  IoStatus status = IoStatus::kOk;
  std::string why;  // "recv: Connection reset by peer", "timed out", "end of stream"
  explicit operator bool() const { return status == IoStatus::kOk; }
};

// Connects to host:port, trying every address getaddrinfo returns, until the deadline. On
// failure returns an empty UniqueFd and sets *why to the step and reason ("connect: Connection
// refused", "getaddrinfo: Name or service not known", "connect: timed out"). The socket is
// non-blocking, with TCP_NODELAY and keepalive (a vanished peer is noticed in ~25 s).
UniqueFd connect_tcp(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                     std::string* why);

// Writes everything by the deadline (MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE).
IoResult write_all(int fd, std::span<const std::uint8_t> data, Clock::time_point deadline);

// Reads exactly out.size() bytes. Without a deadline it waits until data, end of stream, an
// error, or a shutdown() of the socket by another thread.
IoResult read_exact(int fd, std::span<std::uint8_t> out, std::optional<Clock::time_point> deadline);

}  // namespace hora::rdv::net
