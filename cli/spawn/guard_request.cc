#include "cli/spawn/guard_request.h"

#include <charconv>

#include <fmt/format.h>

#include "cli/base/errors.h"

namespace hora::cli {
namespace {

void record(std::string& out, std::string_view key, std::string_view payload) {
  out += key;
  out += ' ';
  out += std::to_string(payload.size());
  out += '\n';
  out += payload;
  out += '\n';
}

void check_no_nul(std::string_view what, std::string_view value) {
  if (value.find('\0') != std::string_view::npos) {
    throw GuardProtocolError(
        fmt::format("{} contains a NUL byte, which a process cannot receive", what));
  }
}

}  // namespace

std::string GuardRequest::encode() const {
  if (argv.empty()) throw GuardProtocolError("the rank's command is empty");
  std::string out(kHeader);
  check_no_nul("the working directory", cwd);
  record(out, "cwd", cwd);
  for (const auto& [name, value] : env) {
    if (name.empty() || name.find('=') != std::string::npos) {
      throw GuardProtocolError(
          fmt::format("environment variable name '{}' is empty or has '='", name));
    }
    check_no_nul("environment variable " + name, name + value);
    record(out, "env", name + "=" + value);
  }
  for (const std::string& arg : argv) {
    check_no_nul("a command argument", arg);
    record(out, "arg", arg);
  }
  record(out, "grace_ms", std::to_string(grace.count()));
  record(out, "start", "");
  if (out.size() > kMaxBytes) {
    throw GuardProtocolError(
        fmt::format("the rank's request is {} bytes, more than the {} "
                    "allowed; forward fewer variables with -x",
                    out.size(), kMaxBytes));
  }
  return out;
}

std::optional<GuardRequest> GuardRequest::decode(std::string_view data, std::size_t& consumed) {
  const std::size_t limit = std::min(data.size(), kMaxBytes);
  // The header may arrive in pieces; compare what we have.
  const std::size_t head = std::min(limit, kHeader.size());
  if (data.substr(0, head) != kHeader.substr(0, head)) {
    throw GuardProtocolError(
        "the request does not start with 'HORA-GUARD 1': the launcher and this horarun are "
        "different versions, or something else wrote to the guard's stdin");
  }
  if (limit < kHeader.size()) return std::nullopt;

  GuardRequest request;
  std::size_t pos = kHeader.size();
  while (true) {
    const std::size_t eol = data.find('\n', pos);
    if (eol == std::string_view::npos || eol >= limit) {
      if (data.size() >= kMaxBytes) {
        throw GuardProtocolError(fmt::format("the request exceeds {} bytes", kMaxBytes));
      }
      if (eol == std::string_view::npos && data.size() - pos > 64) {
        throw GuardProtocolError("a record header is longer than 64 bytes");
      }
      return std::nullopt;
    }
    std::string_view line = data.substr(pos, eol - pos);
    // The same bound whether or not the line is complete yet, so a stream that arrives in
    // pieces is judged like one that arrives whole (found by fuzz/guard_request_fuzz).
    if (line.size() > 64) throw GuardProtocolError("a record header is longer than 64 bytes");
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos) {
      throw GuardProtocolError(fmt::format("malformed record header '{}'", line.substr(0, 64)));
    }
    std::string_view key = line.substr(0, space);
    std::string_view len_text = line.substr(space + 1);
    std::size_t len = 0;
    auto [end, ec] = std::from_chars(len_text.data(), len_text.data() + len_text.size(), len);
    if (ec != std::errc() || end != len_text.data() + len_text.size() || len > kMaxBytes) {
      throw GuardProtocolError(fmt::format("record '{}' has a bad length '{}'", key, len_text));
    }
    const std::size_t payload_at = eol + 1;
    if (payload_at + len + 1 > data.size()) {
      if (payload_at + len + 1 > kMaxBytes) {
        throw GuardProtocolError(fmt::format("the request exceeds {} bytes", kMaxBytes));
      }
      return std::nullopt;
    }
    std::string_view payload = data.substr(payload_at, len);
    if (data[payload_at + len] != '\n') {
      throw GuardProtocolError(fmt::format("record '{}' is not terminated by a newline", key));
    }
    pos = payload_at + len + 1;

    if (key == "cwd") {
      request.cwd = std::string(payload);
    } else if (key == "env") {
      const std::size_t eq = payload.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        throw GuardProtocolError("an env record is not NAME=VALUE");
      }
      request.env.emplace_back(std::string(payload.substr(0, eq)),
                               std::string(payload.substr(eq + 1)));
    } else if (key == "arg") {
      request.argv.emplace_back(payload);
    } else if (key == "grace_ms") {
      long long ms = 0;
      auto [e, c] = std::from_chars(payload.data(), payload.data() + payload.size(), ms);
      if (c != std::errc() || e != payload.data() + payload.size() || ms < 0) {
        throw GuardProtocolError(fmt::format("grace_ms '{}' is not a number", payload));
      }
      request.grace = std::chrono::milliseconds(ms);
    } else if (key == "start") {
      if (request.argv.empty()) throw GuardProtocolError("the request has no command (arg)");
      consumed = pos;
      return request;
    } else {
      throw GuardProtocolError(fmt::format("unknown record '{}'", key.substr(0, 32)));
    }
  }
}

}  // namespace hora::cli
