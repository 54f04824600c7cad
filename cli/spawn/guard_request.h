// What the launcher tells a guard on its stdin: the rank's working directory, environment and
// command, then later requests. docs/launcher.md ("The guard's stdin protocol") is the
// reference; this file is its only implementation, shared by the local and SSH spawners.
//
// The stream is a header line and length-prefixed records, so values may hold any byte but NUL:
//
//   HORA-GUARD 1\n                 version line
//   cwd 9\n/home/ann\n             KEY SP LENGTH LF, LENGTH bytes of payload, LF
//   env 11\nHORA_RANK=3\n          one record per variable, NAME=VALUE
//   arg 7\n./train\n               one record per argv element, argv[0] first
//   grace_ms 4\n3000\n             SIGTERM-to-SIGKILL grace
//   start 0\n\n                    end of the request: the guard starts the command
//
// After `start` the launcher may send request lines; the only one is `terminate\n`. End of
// file on stdin (the launcher died, or the SSH channel closed) means terminate as well.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hora::cli {

struct GuardRequest {
  static constexpr std::chrono::milliseconds kDefaultGrace{3000};
  static constexpr std::size_t kMaxBytes = 16u << 20;  // whole request
  static constexpr std::string_view kHeader = "HORA-GUARD 1\n";
  static constexpr std::string_view kTerminate = "terminate\n";

  std::string cwd;  // empty: stay where the guard started
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> argv;
  std::chrono::milliseconds grace = kDefaultGrace;

  // Throws GuardProtocolError if a value cannot be carried (NUL bytes, '=' in a name, no argv).
  std::string encode() const;

  // Parses a request from the front of `data`. Returns nullopt while the request is incomplete
  // and sets `consumed` to its length once complete. Throws GuardProtocolError if malformed.
  static std::optional<GuardRequest> decode(std::string_view data, std::size_t& consumed);
};

}  // namespace hora::cli
