// Parallel preflight: connect to many hosts at once, authenticate, and run a probe command on
// each, every host with the same deadline. horarun builds its preflight on this: it reports every
// failing host in one message and starts nothing unless all succeeded.
//
// Each host is handled by its own thread (connecting is blocking and mostly waiting); the call
// returns when every host finished or the deadline passed, so it takes as long as the slowest
// host, not the sum. Results come back in the order of the requests.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ssh/config.h"
#include "ssh/session.h"

namespace hora::ssh {

struct ProbeRequest {
  ProbeRequest(Target target, std::string command = {}, std::string stdin_data = {},
               std::string keep_running_after = {})
      : target(std::move(target)),
        command(std::move(command)),
        stdin_data(std::move(stdin_data)),
        keep_running_after(std::move(keep_running_after)) {}

  Target target;
  std::string command;     // empty: only connect and authenticate
  std::string stdin_data;  // sent to the command's stdin, then EOF
  // Non-empty: the command keeps running (Session::start_until); the probe ends when its stdout
  // holds this marker, and the result keeps the running channel (`started`).
  std::string keep_running_after;
};

struct ProbeResult {
  Target target;
  // Set when the host failed: the ssh::Error (ResolveError, ConnectError, TimeoutError,
  // HostKeyError, AuthError, ChannelError) whose what() is the message for the user.
  std::exception_ptr error;
  std::string error_message;  // what() of `error`, for printing
  // The probe's outcome when it ran, whatever its exit status (the caller judges the output).
  std::optional<RunResult> run;
  // The connected session when keep_sessions was set and the host succeeded; the launcher reuses
  // it to spawn ranks (one connection per host). Hand it to one thread at a time (session.h).
  std::unique_ptr<Session> session;
  // With keep_running_after: the running command's channel (set when the marker came; `run`
  // then holds the output before it) and what followed the marker.
  std::shared_ptr<Channel> started;
  std::string started_rest;
  std::string local_address;  // Session::local_address(), kept even when the session is not
  std::chrono::milliseconds elapsed{0};

  bool ok() const { return error == nullptr; }
};

struct PreflightOptions {
  // sshd's MaxStartups (default 10:30:100) starts refusing unauthenticated connections past 10
  // at once from anywhere; the preflight keeps at most this many in their handshake together.
  static constexpr int kDefaultMaxConnecting = 8;

  ConnectOptions connect;
  bool keep_sessions = false;
  int max_connecting = kDefaultMaxConnecting;
};

// Runs all requests concurrently; never throws for a host's failure (that goes in its result).
std::vector<ProbeResult> probe_hosts(const std::vector<ProbeRequest>& requests,
                                     const PreflightOptions& options, Clock::time_point deadline);

// One line per failed host, prefixed "  ", under a heading: "preflight failed on 2 of 4 hosts:".
// Empty when every host succeeded.
std::string describe_failures(const std::vector<ProbeResult>& results);

}  // namespace hora::ssh
