// hora's exceptions. Every error a training program can see is a hora::Error; its what() says
// who (rank, host), what failed, why, and what to change.
#pragma once

#include <stdexcept>
#include <string>

namespace hora {

class Error : public std::runtime_error {
 public:
  // rank is -1 when not known (before init()); host may be empty.
  Error(const std::string& message, int rank = -1, std::string host = {});
  int rank() const noexcept { return rank_; }
  const std::string& host() const noexcept { return host_; }

 private:
  int rank_;
  std::string host_;
};

// Wrong arguments or environment (a bad count, an unknown root, a malformed HORA_* variable).
class UsageError : public Error {
  using Error::Error;
};

// Could not reach or authenticate with the rendezvous server or a peer.
class ConnectionError : public Error {
  using Error::Error;
};

// A deadline passed; the message says what was still missing.
class TimeoutError : public Error {
  using Error::Error;
};

// A peer died or closed its connection during a collective. peer() is -1 when unknown.
class PeerFailure : public Error {
 public:
  PeerFailure(const std::string& message, int rank, std::string host, int peer);
  int peer() const noexcept { return peer_; }

 private:
  int peer_;
};

// Ranks disagreed about an operation (shapes, dtypes, ops or roots differ across ranks).
class MismatchError : public Error {
  using Error::Error;
};

// The launcher aborted the job (another rank failed, or horarun was interrupted).
class AbortedError : public Error {
  using Error::Error;
};

}  // namespace hora
