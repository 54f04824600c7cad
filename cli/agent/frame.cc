#include "cli/agent/frame.h"

#include <fmt/format.h>

namespace hora::cli::agent {
namespace {

void put_u32(std::string& out, std::uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

std::uint32_t get_u32(std::string_view in) {
  auto b = [&](std::size_t i) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(in[i]));
  };
  return b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
}

}  // namespace

bool known_type(std::uint8_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kOpen:
    case FrameType::kStdin:
    case FrameType::kStdinEof:
    case FrameType::kClose:
    case FrameType::kStdout:
    case FrameType::kStderr:
    case FrameType::kExit:
    case FrameType::kFailed:
    case FrameType::kStarted:
    case FrameType::kRelayOpen:
    case FrameType::kRelayData:
    case FrameType::kRelayClose:
    case FrameType::kRelayKill:
    case FrameType::kRelayKilled:
    case FrameType::kRelayReady:
    case FrameType::kRelayOutput:
    case FrameType::kRelayStderr:
    case FrameType::kRelayEnded:
    case FrameType::kHeartbeat:
    case FrameType::kEnding:
    case FrameType::kState: return true;
  }
  return false;
}

const char* type_name(FrameType type) {
  switch (type) {
    case FrameType::kOpen: return "OPEN";
    case FrameType::kStdin: return "STDIN";
    case FrameType::kStdinEof: return "STDIN_EOF";
    case FrameType::kClose: return "CLOSE";
    case FrameType::kStdout: return "STDOUT";
    case FrameType::kStderr: return "STDERR";
    case FrameType::kExit: return "EXIT";
    case FrameType::kFailed: return "FAILED";
    case FrameType::kStarted: return "STARTED";
    case FrameType::kRelayOpen: return "RELAY_OPEN";
    case FrameType::kRelayData: return "RELAY_DATA";
    case FrameType::kRelayClose: return "RELAY_CLOSE";
    case FrameType::kRelayKill: return "RELAY_KILL";
    case FrameType::kRelayKilled: return "RELAY_KILLED";
    case FrameType::kRelayReady: return "RELAY_READY";
    case FrameType::kRelayOutput: return "RELAY_OUTPUT";
    case FrameType::kRelayStderr: return "RELAY_STDERR";
    case FrameType::kRelayEnded: return "RELAY_ENDED";
    case FrameType::kState: return "STATE";
    case FrameType::kHeartbeat: return "HEARTBEAT";
    case FrameType::kEnding: return "ENDING";
  }
  return "?";
}

void append_frame(std::string& out, FrameType type, std::uint32_t id, std::string_view payload) {
  out.push_back(static_cast<char>(type));
  put_u32(out, id);
  put_u32(out, static_cast<std::uint32_t>(payload.size()));
  out.append(payload);
}

void append_chunked(std::string& out, FrameType type, std::uint32_t id, std::string_view data) {
  while (!data.empty()) {
    const std::string_view part = data.substr(0, kChunk);
    append_frame(out, type, id, part);
    data.remove_prefix(part.size());
  }
}

void FrameDecoder::feed(std::string_view data) {
  if (!error_.empty()) return;
  // Drop what was consumed before growing the buffer again.
  if (start_ > 0 && start_ >= buffer_.size() / 2) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  buffer_.append(data);
}

std::optional<Frame> FrameDecoder::next() {
  if (!error_.empty()) return std::nullopt;
  const std::string_view in = std::string_view(buffer_).substr(start_);
  if (in.size() < kHeaderBytes) return std::nullopt;
  const auto type = static_cast<std::uint8_t>(in[0]);
  const std::uint32_t length = get_u32(in.substr(5));
  if (!known_type(type)) {
    error_ = fmt::format("unknown frame type 0x{:02x}", type);
    return std::nullopt;
  }
  if (length > kMaxPayload) {
    error_ = fmt::format("{} frame of {} bytes (at most {})", type_name(FrameType{type}), length,
                         kMaxPayload);
    return std::nullopt;
  }
  if (in.size() < kHeaderBytes + length) return std::nullopt;
  Frame f;
  f.type = static_cast<FrameType>(type);
  f.id = get_u32(in.substr(1));
  f.payload.assign(in.substr(kHeaderBytes, length));
  start_ += kHeaderBytes + length;
  return f;
}

std::string encode_open(const OpenRequest& request) {
  std::string out = request.cwd;
  for (const std::string& a : request.args) {
    out.push_back('\0');
    out.append(a);
  }
  return out;
}

std::optional<OpenRequest> decode_open(std::string_view payload) {
  OpenRequest r;
  std::size_t nul = payload.find('\0');
  if (nul == std::string_view::npos) return std::nullopt;
  r.cwd.assign(payload.substr(0, nul));
  payload.remove_prefix(nul + 1);
  while (true) {
    nul = payload.find('\0');
    const std::string_view arg = payload.substr(0, nul);
    if (arg.empty()) return std::nullopt;
    r.args.emplace_back(arg);
    if (nul == std::string_view::npos) break;
    payload.remove_prefix(nul + 1);
  }
  return r;
}

std::string encode_exit(ExitCode code) {
  std::string out;
  put_u32(out, code.status);
  put_u32(out, code.signal);
  return out;
}

std::optional<ExitCode> decode_exit(std::string_view payload) {
  if (payload.size() != 8) return std::nullopt;
  return ExitCode{get_u32(payload), get_u32(payload.substr(4))};
}

std::string encode_pid(std::uint32_t pid) {
  std::string out;
  put_u32(out, pid);
  return out;
}

std::optional<std::uint32_t> decode_pid(std::string_view payload) {
  if (payload.size() != 4) return std::nullopt;
  return get_u32(payload);
}

}  // namespace hora::cli::agent
